// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udpdrop: UDP receive drops per local port and per reason, from one
 * handler per dropped datagram.
 *
 *   skb:kfree_skb               every dropped skb by drop reason (5.17+), and
 *                               per local port when the receiving socket is
 *                               a UDP socket of the measured namespace
 *   udp:udp_fail_queue_rcv_skb  per local port and errno, only on kernels
 *                               whose kfree_skb does not name the socket
 *
 * Why this design: under a flood into a full receive buffer every datagram
 * is a drop, so the cost per drop is the probe's cost. Since 6.12,
 * __udp_queue_rcv_skb drops with sk_skb_reason_drop(sk, skb, reason), and
 * kfree_skb's 4th argument (rx_sk) is the receiving socket: that one event
 * carries the port and the reason (SOCKET_RCVBUFF for a full buffer, what
 * /proc/net/snmp counts as RcvbufErrors; PROTO_MEM for protocol memory).
 * udp_fail_queue_rcv_skb fires for the same datagram just before it, so the
 * loader leaves it unattached there (one handler per drop instead of two,
 * and no drop counted twice per port). Before 6.12 the skb has no owner yet
 * when UDP drops it (skb->sk is NULL), so there udp_fail_queue_rcv_skb
 * supplies the port and kfree_skb only the system-wide reasons.
 * sock:sock_rcvqueue_full is not used: UDP never queues through
 * __sock_queue_rcv_skb, so it does not fire for UDP sockets (measured: 0
 * events against 53k udp_fail_queue_rcv_skb in a loopback flood on 6.18).
 *
 * Per event: reasons below UDPDROP_REASON_SLOTS (all of the core
 * skb_drop_reason values; subsystem reasons carry a subsystem id in the
 * high bits) are counted in a per-CPU array, an inlined bounds check with
 * no hashing. With a target port (perfscope udp --port) the per-port key
 * space is small too (kind x family x reason) and goes to a second per-CPU
 * array; only counts for every port need a hash, looked up first and
 * inserted with the count already in it. tp_btf programs read fields with
 * plain loads (access.h); raw_tp/tracepoint fall back to CO-RE reads.
 * Reason names come from the kernel's BTF (enum skb_drop_reason) in user
 * space, so no enum values are compiled in here.
 *
 * TCP drops per local port come from the same kfree_skb handler (a second
 * program on kfree_skb would make every drop pay twice). The port is the
 * socket's when the drop names one (rx_sk, else skb->sk: a listener, a full
 * socket, or a request/TIME_WAIT socket, whose sock_common carries the
 * port too). Without a socket (NO_SOCKET: a SYN to a port nobody listens
 * on; drops before the socket lookup) the packet is taken as received and
 * its TCP header's destination port, read through skb->head +
 * transport_header, is the local port, and the namespace is the receiving
 * device's. Not attributable, and said so: a TCP packet whose transport
 * header is not set yet (dropped in IP before the TCP layer) is counted on
 * port 0 of its namespace, as is one the kernel's per-CPU control socket
 * (port 0) sends; a packet with no socket and no device (no namespace to
 * filter by), or an IPv6 TCP packet behind extension headers (its next
 * header is not TCP), is counted only in the system-wide reasons.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "access.h"
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum udpdrop_hook);

enum { AF_INET = 2, AF_INET6 = 10 };
enum { IPPROTO_TCP = 6, ETH_P_IP = 0x0800, ETH_P_IPV6 = 0x86DD };
/* Socket states whose struct is not a full sock: only TCP has them here. */
enum { TCP_TIME_WAIT = 6, TCP_NEW_SYN_RECV = 12 };

/* Only count this local port in the per-port map (0: every port). Reason
 * totals are always system-wide. */
const volatile __u16 target_port = 0;
/* Inode of the network namespace whose sockets are counted per port. */
const volatile __u32 target_netns = 0;
/* kfree_skb passes the receiving socket as a 4th argument (6.12+); set by
 * the loader from the tracepoint's BTF prototype. Without it, skb->sk. */
const volatile bool kfree_skb_has_rx_sk = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct port_drop_key);
	__type(value, __u64);
} port_drops SEC(".maps");

/* Indexed by skb_drop_reason, for reasons below UDPDROP_REASON_SLOTS. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPDROP_REASON_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} reason_drops SEC(".maps");

/* Drops on target_port: index (kind slot * UDPDROP_FAMILY_SLOTS + family
 * slot) * UDPDROP_REASON_SLOTS + reason; see count_port. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * UDPDROP_FAMILY_SLOTS * UDPDROP_REASON_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} target_port_drops SEC(".maps");

/* Subsystem drop reasons (subsystem id << 16 | code). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} subsys_reason_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPDROP_LOST_REASONS);
	__type(key, enum udpdrop_lost);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(enum udpdrop_lost why)
{
	__u64 *l = bpf_map_lookup_elem(&lost, &why);
	if (l)
		(*l)++;
}

/* Adds one to key's counter in a per-CPU hash of u64. */
static __always_inline void count(void *map, const void *key, enum udpdrop_lost why)
{
	__u64 *n = bpf_map_lookup_elem(map, key);
	if (n) {
		(*n)++;
		return;
	}
	__u64 one = 1;
	/* A per-CPU hash insert sets this CPU's value and zeroes the others.
	 * EEXIST: another CPU inserted the key meanwhile. */
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(map, key);
	if (n)
		(*n)++;
	else
		count_lost(why);
}

static __always_inline void count_port(__u16 port, __u16 family, enum udpdrop_kind kind, __u32 reason, __u32 proto)
{
	if (target_port && proto == PERFSCOPE_IPPROTO_UDP && reason < UDPDROP_REASON_SLOTS) {
		__u32 fam = family == AF_INET ? 1 : family == AF_INET6 ? 2 : 0;
		__u32 k = kind == UDPDROP_KFREE_SKB ? 1 : 0;
		__u32 idx = (k * UDPDROP_FAMILY_SLOTS + fam) * UDPDROP_REASON_SLOTS + reason;
		__u64 *n = bpf_map_lookup_elem(&target_port_drops, &idx);
		if (n) {
			(*n)++;
			return;
		}
	}
	struct port_drop_key key = { .port = port, .family = family, .kind = kind, .reason = reason, .proto = proto };
	count(&port_drops, &key, UDPDROP_LOST_PORT);
}

/* A drop on a UDP socket; udp says its protocol was read already (the
 * kfree_skb handler reads it to tell UDP from TCP). */
static __always_inline void count_sock(const struct sock *sk, enum udpdrop_kind kind, __u32 reason, const bool udp, const bool direct)
{
	if (!sk)
		return;
	int port = udp ? udp_local_port_in(sk, target_netns, target_port, direct) : udp_port_in(sk, target_netns, target_port, direct);
	if (port >= 0)
		count_port(port, READ(direct, sk, __sk_common.skc_family), kind, reason, PERFSCOPE_IPPROTO_UDP);
}

/* A TCP drop on a local port (port 0: not attributable) of the measured
 * namespace, unless --port names another. */
static __always_inline void count_tcp(__u16 port, __u16 family, struct net *net, __u32 reason, const bool direct)
{
	if (target_port && port && port != target_port)
		return;
	if (!net || READ(direct, net, ns.inum) != target_netns)
		return;
	count_port(port, family, UDPDROP_KFREE_SKB, reason, IPPROTO_TCP);
}

/* A drop that names a socket: UDP as before (its test first, so a UDP
 * buffer flood pays no more than it did), TCP by the socket's port. A
 * request or TIME_WAIT socket is not a full sock: its sk_protocol is not
 * read but implied by the state, only TCP has those. */
static __always_inline void on_sock_drop(const struct sock *sk, __u32 reason, const bool direct)
{
	__u16 proto = READ(direct, sk, sk_protocol);
	if (proto == PERFSCOPE_IPPROTO_UDP) {
		count_sock(sk, UDPDROP_KFREE_SKB, reason, true, direct);
		return;
	}
	__u16 family = READ(direct, sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return;
	__u8 state = READ(direct, sk, __sk_common.skc_state);
	if (proto != IPPROTO_TCP && state != TCP_TIME_WAIT && state != TCP_NEW_SYN_RECV)
		return;
	count_tcp(READ(direct, sk, __sk_common.skc_num), family, READ(direct, sk, __sk_common.skc_net.net), reason, direct);
}

/* A drop with no socket: a TCP packet's destination port, read from its
 * headers (the packet bytes always through bpf_probe_read_kernel). */
static __always_inline void on_skb_drop(const struct sk_buff *skb, __u32 reason, const bool direct)
{
	__u16 eth = bpf_ntohs(READ(direct, skb, protocol));
	__u16 family;
	__u32 proto_at;
	if (eth == ETH_P_IP) {
		family = AF_INET;
		proto_at = 9; /* struct iphdr.protocol */
	} else if (eth == ETH_P_IPV6) {
		family = AF_INET6;
		proto_at = 6; /* struct ipv6hdr.nexthdr */
	} else {
		return;
	}
	unsigned char *head = READ(direct, skb, head);
	__u16 nh = READ(direct, skb, network_header);
	__u8 proto = 0;
	if (!head || nh == (__u16)~0 || bpf_probe_read_kernel(&proto, 1, head + nh + proto_at) || proto != IPPROTO_TCP)
		return;
	struct net_device *dev = READ(direct, skb, dev);
	if (!dev)
		return; /* no namespace to filter by: system-wide reasons only */
	struct net *net = READ(direct, dev, nd_net.net);
	__u16 th = READ(direct, skb, transport_header);
	__u16 dport = 0;
	if (th != (__u16)~0 && th > nh && bpf_probe_read_kernel(&dport, 2, head + th + 2) == 0)
		dport = bpf_ntohs(dport); /* struct tcphdr.dest */
	else
		dport = 0;
	count_tcp(dport, family, net, reason, direct);
}

static __always_inline int on_kfree_skb(const struct sk_buff *skb, __u32 reason, const struct sock *rx_sk, const bool direct)
{
	__u64 *n = bpf_map_lookup_elem(&reason_drops, &reason);
	if (n)
		(*n)++;
	else
		count(&subsys_reason_drops, &reason, UDPDROP_LOST_REASON);
	const struct sock *sk = rx_sk;
	if (!sk && skb)
		sk = READ(direct, skb, sk);
	if (sk)
		on_sock_drop(sk, reason, direct);
	else if (skb)
		on_skb_drop(skb, reason, direct);
	return 0;
}

/* tp_btf: typed arguments. kfree_skb is read from the raw context so that
 * the optional 4th argument is only touched where it exists (the verifier
 * prunes the branch on the constant); the loads still yield BTF-typed
 * pointers, since the verifier types context slots from the prototype. */
static __always_inline int on_fail_queue(struct sock *sk, int rc, const bool direct)
{
	count_sock(sk, UDPDROP_FAIL_QUEUE_RCV, (__u32)-rc, false, direct);
	return 0;
}
SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(btf_udp_fail_queue_rcv_skb, int rc, struct sock *sk)
{ return SELF_COSTED(UDPDROP_HOOK_FAIL_QUEUE_RCV, on_fail_queue(sk, rc, true)); }
static __always_inline int btf_kfree(unsigned long long *ctx)
{
	struct sk_buff *skb = (void *)ctx[0];
	const struct sock *sk = 0;
	if (kfree_skb_has_rx_sk)
		sk = (void *)ctx[3];
	return on_kfree_skb(skb, (__u32)ctx[2], sk, true);
}
SEC("tp_btf/kfree_skb")
int btf_kfree_skb(unsigned long long *ctx) { return SELF_COSTED(UDPDROP_HOOK_KFREE_SKB, btf_kfree(ctx)); }

/* raw_tp: arguments as u64. */
SEC("raw_tp/udp_fail_queue_rcv_skb")
int raw_udp_fail_queue_rcv_skb(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(UDPDROP_HOOK_FAIL_QUEUE_RCV, on_fail_queue((void *)ctx->args[1], (int)ctx->args[0], false)); }
static __always_inline int raw_kfree(struct bpf_raw_tracepoint_args *ctx)
{
	const struct sock *sk = 0;
	if (kfree_skb_has_rx_sk)
		sk = (void *)ctx->args[3];
	return on_kfree_skb((void *)ctx->args[0], (__u32)ctx->args[2], sk, false);
}
SEC("raw_tp/kfree_skb")
int raw_kfree_skb(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(UDPDROP_HOOK_KFREE_SKB, raw_kfree(ctx)); }

/* Classic tracepoints. udp_fail_queue_rcv_skb's record names the local
 * port as dport since 6.10 (lport before) but not the socket, so its drops
 * cannot be filtered by namespace. */
static __always_inline int tp_fail_queue(struct trace_event_raw_udp_fail_queue_rcv_skb *ctx)
{
	__u16 port, family = 0;
	if (bpf_core_field_exists(ctx->dport)) {
		port = ctx->dport;
		family = ctx->family;
	} else {
		port = BPF_CORE_READ(ctx, lport);
	}
	if (!target_port || port == target_port)
		count_port(port, family, UDPDROP_FAIL_QUEUE_RCV, (__u32)-ctx->rc, PERFSCOPE_IPPROTO_UDP);
	return 0;
}
SEC("tracepoint/udp/udp_fail_queue_rcv_skb")
int tp_udp_fail_queue_rcv_skb(struct trace_event_raw_udp_fail_queue_rcv_skb *ctx)
{ return SELF_COSTED(UDPDROP_HOOK_FAIL_QUEUE_RCV, tp_fail_queue(ctx)); }
static __always_inline int tp_kfree(struct trace_event_raw_kfree_skb *ctx)
{
	const struct sock *sk = 0;
	if (kfree_skb_has_rx_sk && bpf_core_field_exists(ctx->rx_sk))
		sk = BPF_CORE_READ(ctx, rx_sk);
	__u32 reason = bpf_core_field_exists(ctx->reason) ? BPF_CORE_READ(ctx, reason) : 0;
	return on_kfree_skb(ctx->skbaddr, reason, sk, false);
}
SEC("tracepoint/skb/kfree_skb")
int tp_kfree_skb(struct trace_event_raw_kfree_skb *ctx) { return SELF_COSTED(UDPDROP_HOOK_KFREE_SKB, tp_kfree(ctx)); }
