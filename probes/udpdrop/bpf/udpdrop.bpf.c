// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udpdrop: UDP receive drops per local port and per reason.
 *
 *   udp:udp_fail_queue_rcv_skb  the socket refused a datagram (receive
 *                               buffer full: rc = -ENOMEM, what
 *                               /proc/net/snmp counts as RcvbufErrors)
 *   sock:sock_rcvqueue_full     generic socket receive queue full, UDP only
 *   skb:kfree_skb               every dropped skb by drop reason; per port
 *                               too when the skb belongs to a UDP socket
 *
 * Counts live in per-CPU hashes; user space sums them and names the drop
 * reasons from the kernel's BTF (enum skb_drop_reason), so no enum values
 * are compiled in here.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Only count this local port in the per-port map (0: every port). Reason
 * totals are always system-wide. */
const volatile __u16 target_port = 0;
/* kfree_skb passes the receiving socket as a 4th argument (6.12+); set by
 * the loader from the tracepoint's BTF prototype. Without it, skb->sk. */
const volatile bool kfree_skb_has_rx_sk = false;

enum { IPPROTO_UDP = 17 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct port_drop_key);
	__type(value, __u64);
} port_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} reason_drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPDROP_LOST_REASONS);
	__type(key, enum udpdrop_lost);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count(void *map, const void *key, enum udpdrop_lost why)
{
	__u64 *n = bpf_map_lookup_elem(map, key);
	if (n) {
		(*n)++;
		return;
	}
	__u64 one = 1;
	/* EEXIST: another CPU inserted it; on this CPU the count starts now. */
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(map, key);
	if (n) {
		(*n)++;
		return;
	}
	__u64 *l = bpf_map_lookup_elem(&lost, &why);
	if (l)
		(*l)++;
}

static __always_inline void count_port(__u16 port, __u16 family, enum udpdrop_kind kind, __u32 reason)
{
	if (target_port && port != target_port)
		return;
	struct port_drop_key key = { .port = port, .family = family, .kind = kind, .reason = reason };
	count(&port_drops, &key, UDPDROP_LOST_PORT);
}

static __always_inline void count_sock(const struct sock *sk, enum udpdrop_kind kind, __u32 reason)
{
	if (!sk)
		return;
	count_port(BPF_CORE_READ(sk, __sk_common.skc_num), BPF_CORE_READ(sk, __sk_common.skc_family), kind, reason);
}

static __always_inline int on_fail_queue(int rc, const struct sock *sk)
{
	count_sock(sk, UDPDROP_FAIL_QUEUE_RCV, (__u32)-rc);
	return 0;
}

static __always_inline int on_rcvqueue_full(const struct sock *sk)
{
	if (sk && BPF_CORE_READ(sk, sk_protocol) == IPPROTO_UDP)
		count_sock(sk, UDPDROP_RCVQUEUE_FULL, 0);
	return 0;
}

static __always_inline int on_kfree_skb(const struct sk_buff *skb, __u32 reason, const struct sock *rx_sk)
{
	count(&reason_drops, &reason, UDPDROP_LOST_REASON);
	const struct sock *sk = rx_sk;
	if (!sk && skb)
		sk = BPF_CORE_READ(skb, sk);
	if (sk && BPF_CORE_READ(sk, sk_protocol) == IPPROTO_UDP)
		count_sock(sk, UDPDROP_KFREE_SKB, reason);
	return 0;
}

/* tp_btf: typed arguments. kfree_skb is read from the raw context so that
 * the optional 4th argument is only touched where it exists (the verifier
 * prunes the branch on the constant). */
SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(btf_udp_fail_queue_rcv_skb, int rc, struct sock *sk) { return on_fail_queue(rc, sk); }
SEC("tp_btf/sock_rcvqueue_full")
int BPF_PROG(btf_sock_rcvqueue_full, struct sock *sk) { return on_rcvqueue_full(sk); }
SEC("tp_btf/kfree_skb")
int btf_kfree_skb(unsigned long long *ctx)
{
	const struct sock *sk = 0;
	if (kfree_skb_has_rx_sk)
		sk = (void *)ctx[3];
	return on_kfree_skb((void *)ctx[0], (__u32)ctx[2], sk);
}

/* raw_tp: arguments as u64. */
SEC("raw_tp/udp_fail_queue_rcv_skb")
int raw_udp_fail_queue_rcv_skb(struct bpf_raw_tracepoint_args *ctx)
{ return on_fail_queue((int)ctx->args[0], (void *)ctx->args[1]); }
SEC("raw_tp/sock_rcvqueue_full")
int raw_sock_rcvqueue_full(struct bpf_raw_tracepoint_args *ctx) { return on_rcvqueue_full((void *)ctx->args[0]); }
SEC("raw_tp/kfree_skb")
int raw_kfree_skb(struct bpf_raw_tracepoint_args *ctx)
{
	const struct sock *sk = 0;
	if (kfree_skb_has_rx_sk)
		sk = (void *)ctx->args[3];
	return on_kfree_skb((void *)ctx->args[0], (__u32)ctx->args[2], sk);
}

/* Classic tracepoints. udp_fail_queue_rcv_skb's record names the local
 * port as dport since 6.10 (lport before); sock_rcvqueue_full's record has
 * no socket, so its drops count under port 0. */
SEC("tracepoint/udp/udp_fail_queue_rcv_skb")
int tp_udp_fail_queue_rcv_skb(struct trace_event_raw_udp_fail_queue_rcv_skb *ctx)
{
	if (bpf_core_field_exists(ctx->dport))
		count_port(ctx->dport, ctx->family, UDPDROP_FAIL_QUEUE_RCV, (__u32)-ctx->rc);
	else
		count_port(BPF_CORE_READ(ctx, lport), 0, UDPDROP_FAIL_QUEUE_RCV, (__u32)-ctx->rc);
	return 0;
}
SEC("tracepoint/sock/sock_rcvqueue_full")
int tp_sock_rcvqueue_full(void *ctx)
{
	count_port(0, 0, UDPDROP_RCVQUEUE_FULL, 0);
	return 0;
}
SEC("tracepoint/skb/kfree_skb")
int tp_kfree_skb(struct trace_event_raw_kfree_skb *ctx)
{
	const struct sock *sk = 0;
	if (bpf_core_field_exists(ctx->rx_sk))
		sk = BPF_CORE_READ(ctx, rx_sk);
	__u32 reason = bpf_core_field_exists(ctx->reason) ? BPF_CORE_READ(ctx, reason) : 0;
	return on_kfree_skb(ctx->skbaddr, reason, sk);
}
