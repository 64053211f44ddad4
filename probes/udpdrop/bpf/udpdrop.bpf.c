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
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "access.h"
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum udpdrop_hook);

enum { AF_INET = 2, AF_INET6 = 10 };

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

static __always_inline void count_port(__u16 port, __u16 family, enum udpdrop_kind kind, __u32 reason)
{
	if (target_port && reason < UDPDROP_REASON_SLOTS) {
		__u32 fam = family == AF_INET ? 1 : family == AF_INET6 ? 2 : 0;
		__u32 k = kind == UDPDROP_KFREE_SKB ? 1 : 0;
		__u32 idx = (k * UDPDROP_FAMILY_SLOTS + fam) * UDPDROP_REASON_SLOTS + reason;
		__u64 *n = bpf_map_lookup_elem(&target_port_drops, &idx);
		if (n) {
			(*n)++;
			return;
		}
	}
	struct port_drop_key key = { .port = port, .family = family, .kind = kind, .reason = reason };
	count(&port_drops, &key, UDPDROP_LOST_PORT);
}

static __always_inline void count_sock(const struct sock *sk, enum udpdrop_kind kind, __u32 reason, const bool direct)
{
	if (!sk)
		return;
	int port = udp_port_in(sk, target_netns, target_port, direct);
	if (port >= 0)
		count_port(port, READ(direct, sk, __sk_common.skc_family), kind, reason);
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
	count_sock(sk, UDPDROP_KFREE_SKB, reason, direct);
	return 0;
}

/* tp_btf: typed arguments. kfree_skb is read from the raw context so that
 * the optional 4th argument is only touched where it exists (the verifier
 * prunes the branch on the constant); the loads still yield BTF-typed
 * pointers, since the verifier types context slots from the prototype. */
static __always_inline int on_fail_queue(struct sock *sk, int rc, const bool direct)
{
	count_sock(sk, UDPDROP_FAIL_QUEUE_RCV, (__u32)-rc, direct);
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
		count_port(port, family, UDPDROP_FAIL_QUEUE_RCV, (__u32)-ctx->rc);
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
