// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcpevents: TCP retransmissions and resets per connection, the events
 * bcc's tcpretrans and tcpdrop-style tools trace, counted in the kernel.
 *
 *   tcp:tcp_retransmit_skb     a segment retransmitted (6.10+: also one the
 *                              device refused, with the error)
 *   tcp:tcp_retransmit_synack  a listener's SYN-ACK retransmitted (the
 *                              client's ACK never came, or the accept queue
 *                              was full when it did)
 *   tcp:tcp_send_reset         an RST sent, with the kernel's reason (6.10+)
 *   tcp:tcp_receive_reset      an RST received on a socket
 *
 * Keyed by connection (addresses, local and remote port), event, TCP state
 * and, for retransmits, the kind; for sent resets, the sk_rst_reason. The
 * kind is read from the socket, since the tracepoint does not say it: in
 * SYN_SENT a SYN; in the Loss state an RTO retransmit (the timer fired or
 * recovery after it); in Recovery a fast retransmit; with the tail loss
 * probe timer the one pending when it fires a TLP (tcp_write_timer_handler
 * leaves icsk_pending set for the probe, clears it for an RTO).
 * Segments are counted too (tcp_skb_pcount of the retransmitted skb), so
 * their sum is what Tcp RetransSegs counts.
 *
 *   sock:sk_data_ready (6.7+)  data queued on a socket and its reader
 *                              woken: which CPU's softirq fed each TCP
 *                              socket (per-CPU counts by socket inode)
 *
 *   sock:sock_recv_length (6.6+) a thread read the socket: the CPU it runs on
 *
 * sk_data_ready and sock_recv_length are the exception to what follows: it fires per segment
 * with data, so it is its own hook group, attached in sampling windows
 * under the overhead budget, and its counts are read as shares per CPU.
 * It tells the receive path's softirq from the socket owner's
 * release_sock processing the backlog (softirqctx.h), since the latter
 * runs on the owner's CPU whatever CPU the segment arrived on.
 *
 * Why cost is no concern here: these are rare events (a retransmit is a
 * loss; a reset is an abort), not per-packet paths, so every field is read
 * with CO-RE probe reads in all three attach methods, which keeps one
 * handler per event. Only sockets of one network namespace (and one local
 * port, when set) are counted. Totals per event are kept in a per-CPU
 * array that never fills; the per-connection hash counts what it cannot
 * hold in lost.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum tcpevents_hook);

enum { AF_INET = 2, AF_INET6 = 10 };
enum { TCP_SYN_SENT = 2, TCP_NEW_SYN_RECV = 12 };
/* enum tcp_ca_state; ICSK_TIME_LOSS_PROBE of include/net/inet_connection_sock.h */
enum { TCP_CA_Recovery = 3, TCP_CA_Loss = 4, ICSK_TIME_LOSS_PROBE = 5 };

/* Inode of the network namespace whose sockets are counted. */
const volatile __u32 target_netns = 0;
/* Only count this local port (0: every port). */
const volatile __u16 target_port = 0;
/* tcp_retransmit_skb passes err (6.10+) and tcp_send_reset a reason
 * (6.10+); set by the loader from the tracepoints' BTF prototypes. */
const volatile bool retransmit_has_err = false;
const volatile bool send_reset_has_reason = false;

/* Local views of kernel types: CO-RE drops the ___tcp suffix and matches
 * the kernel's structs by member name (through its anonymous unions). */
struct in6_addr___tcp {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common___tcp {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
	struct in6_addr___tcp skc_v6_daddr;
	struct in6_addr___tcp skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

/* The local port of a full socket: skc_num is cleared when a closing
 * socket gives its port back (inet_put_port), inet_sport stays. */
struct inet_sock___tcp {
	__be16 inet_sport;
} __attribute__((preserve_access_index));

struct inet_connection_sock___tcp {
	__u8 icsk_ca_state: 5;
	__u8 icsk_pending;
} __attribute__((preserve_access_index));

struct sk_buff___tcp {
	struct net_device *dev;
	char cb[48];
	__u16 transport_header;
	__u16 network_header;
	unsigned char *head;
} __attribute__((preserve_access_index));

struct tcp_skb_cb___tcp {
	__u16 tcp_gso_segs;
} __attribute__((preserve_access_index));

/* Classic tracepoint records. Before 6.10 tcp_retransmit_skb and
 * tcp_send_reset shared the tcp_event_sk_skb class. */
struct trace_event_raw_tcp_retransmit_skb {
	struct trace_entry ent;
	const void *skbaddr;
	const void *skaddr;
	int err;
} __attribute__((preserve_access_index));

/* Values are read from kernel BTF in user space; the type only has to be
 * an enum for the CO-RE field match. */
enum sk_rst_reason { SK_RST_REASON__PERFSCOPE_UNUSED = 0 };

struct trace_event_raw_tcp_send_reset {
	struct trace_entry ent;
	const void *skbaddr;
	const void *skaddr;
	enum sk_rst_reason reason;
} __attribute__((preserve_access_index));

struct trace_event_raw_tcp_event_sk_skb {
	struct trace_entry ent;
	const void *skbaddr;
	const void *skaddr;
} __attribute__((preserve_access_index));

struct trace_event_raw_tcp_event_sk {
	struct trace_entry ent;
	const void *skaddr;
} __attribute__((preserve_access_index));

struct trace_event_raw_tcp_retransmit_synack {
	struct trace_entry ent;
	const void *skaddr;
	const void *req;
} __attribute__((preserve_access_index));

/* A shared hash with atomic adds, not a per-CPU one: inserting a new key
 * is the common case here (every refused connect is a new 4-tuple), and a
 * per-CPU hash insert measured 14-22 us a run on this VM against 0.5 us
 * for the rest of the handler (BENCHMARKS.md). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tcp_event_key);
	__type(value, struct tcp_event_count);
} conn_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TCPEV_EVENTS);
	__type(key, __u32);
	__type(value, struct tcp_event_count);
} totals SEC(".maps");

/* Retransmits by kind, whatever the connection (never lost). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TCPEV_RTX_KINDS);
	__type(key, enum tcpevents_rtx_kind);
	__type(value, struct tcp_event_count);
} rtx_kinds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TCPEV_LOSTS);
	__type(key, enum tcpevents_lost);
	__type(value, __u64);
} lost SEC(".maps");

/* THREAD_SIZE for softirqctx.h, set by user space (0: context unknown). */
const volatile __u32 thread_size = 0;
#include "softirqctx.h"

struct sock___tcpfeed {
	__u16 sk_protocol;
	struct socket *sk_socket;
} __attribute__((preserve_access_index));

/* LRU: under a load of new connections the map fills with closed ones
 * (nothing deletes them), and a plain hash then refused every later socket
 * at ~2 us a segment (its free lists searched on every CPU, twice): 16,384
 * entries held after ~4 s of nginx at 10k connections/s, 19,256 deliveries
 * refused by then. The least recently fed socket is evicted instead: a
 * closed connection's, not a live one's. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct tcp_feed);
} feeds SEC(".maps");

static __always_inline __u32 netns_of_sk(const struct sock_common___tcp *sk)
{
	return BPF_CORE_READ(sk, skc_net.net, ns.inum);
}

/* full: sk is a full socket (not a request or TIME_WAIT mini socket). */
static __always_inline void key_from_sk(struct tcp_event_key *k, const struct sock_common___tcp *sk, const bool full)
{
	k->family = BPF_CORE_READ(sk, skc_family);
	k->sport = BPF_CORE_READ(sk, skc_num);
	if (full && !k->sport)
		k->sport = bpf_ntohs(BPF_CORE_READ((const struct inet_sock___tcp *)sk, inet_sport));
	k->dport = bpf_ntohs(BPF_CORE_READ(sk, skc_dport));
	if (k->family == AF_INET) {
		__be32 s = BPF_CORE_READ(sk, skc_rcv_saddr), d = BPF_CORE_READ(sk, skc_daddr);
		__builtin_memcpy(k->saddr, &s, 4);
		__builtin_memcpy(k->daddr, &d, 4);
	} else if (k->family == AF_INET6 && bpf_core_field_exists(sk->skc_v6_daddr)) {
		bpf_core_read(k->saddr, 16, &sk->skc_v6_rcv_saddr);
		bpf_core_read(k->daddr, 16, &sk->skc_v6_daddr);
	}
}

/* The segment skb answers (a reset to it): its destination is the local
 * end. Returns false when the headers cannot be read. */
static __always_inline bool key_from_skb(struct tcp_event_key *k, const struct sk_buff___tcp *skb)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 nh = BPF_CORE_READ(skb, network_header), th = BPF_CORE_READ(skb, transport_header);
	__u8 vihl;
	if (!head || bpf_probe_read_kernel(&vihl, 1, head + nh))
		return false;
	if (vihl >> 4 == 4) {
		k->family = AF_INET;
		bpf_probe_read_kernel(k->daddr, 4, head + nh + 12);
		bpf_probe_read_kernel(k->saddr, 4, head + nh + 16);
	} else if (vihl >> 4 == 6) {
		k->family = AF_INET6;
		bpf_probe_read_kernel(k->daddr, 16, head + nh + 8);
		bpf_probe_read_kernel(k->saddr, 16, head + nh + 24);
	} else {
		return false;
	}
	__be16 ports[2];
	if (bpf_probe_read_kernel(ports, sizeof(ports), head + th))
		return false;
	k->dport = bpf_ntohs(ports[0]);
	k->sport = bpf_ntohs(ports[1]);
	return true;
}

static __always_inline void add(struct tcp_event_count *c, __u64 segs)
{
	__sync_fetch_and_add(&c->events, 1);
	__sync_fetch_and_add(&c->segs, segs);
}

static __always_inline bool in_scope(const struct tcp_event_key *k, __u32 netns)
{
	return netns == target_netns && (!target_port || k->sport == target_port);
}

static __always_inline void count(struct tcp_event_key *k, __u64 segs)
{
	__u32 ev = k->event;
	struct tcp_event_count *t = bpf_map_lookup_elem(&totals, &ev);
	if (t)
		add(t, segs);
	if (k->event == TCPEV_RETRANSMIT) {
		__u32 kind = k->detail;
		t = bpf_map_lookup_elem(&rtx_kinds, &kind);
		if (t)
			add(t, segs);
	}
	struct tcp_event_count *c = bpf_map_lookup_elem(&conn_events, k);
	if (c) {
		add(c, segs);
		return;
	}
	struct tcp_event_count first = { .events = 1, .segs = segs };
	/* EEXIST: another CPU's handler inserted the key meanwhile. */
	if (bpf_map_update_elem(&conn_events, k, &first, BPF_NOEXIST) == 0)
		return;
	c = bpf_map_lookup_elem(&conn_events, k);
	if (c) {
		add(c, segs);
		return;
	}
	enum tcpevents_lost why = TCPEV_LOST_CONN;
	__u64 *l = bpf_map_lookup_elem(&lost, &why);
	if (l)
		(*l)++;
}

static __always_inline __u32 rtx_kind(const struct sock_common___tcp *sk, __u8 state)
{
	if (state == TCP_SYN_SENT)
		return TCPEV_RTX_SYN;
	const struct inet_connection_sock___tcp *icsk = (const void *)sk;
	__u8 ca = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state);
	if (ca == TCP_CA_Loss)
		return TCPEV_RTX_RTO;
	if (ca == TCP_CA_Recovery)
		return TCPEV_RTX_FAST;
	if (BPF_CORE_READ(icsk, icsk_pending) == ICSK_TIME_LOSS_PROBE)
		return TCPEV_RTX_TLP;
	return TCPEV_RTX_OTHER;
}

static __always_inline int on_retransmit(const void *skp, const void *skbp, int err)
{
	const struct sock_common___tcp *sk = skp;
	if (!sk)
		return 0;
	struct tcp_event_key k = {};
	key_from_sk(&k, sk, true);
	if (!in_scope(&k, netns_of_sk(sk)))
		return 0;
	k.event = TCPEV_RETRANSMIT;
	k.state = BPF_CORE_READ(sk, skc_state);
	k.detail = rtx_kind(sk, k.state);
	k.err = err;
	__u64 segs = 1;
	const struct sk_buff___tcp *skb = skbp;
	if (skb) {
		const struct tcp_skb_cb___tcp *cb = (const void *)&skb->cb;
		__u16 n = BPF_CORE_READ(cb, tcp_gso_segs);
		if (n > 1)
			segs = n;
	}
	count(&k, segs);
	return 0;
}

/* req is a request_sock, whose first member is its sock_common. */
static __always_inline int on_retransmit_synack(const void *req)
{
	const struct sock_common___tcp *sk = req;
	if (!sk)
		return 0;
	struct tcp_event_key k = {};
	key_from_sk(&k, sk, false);
	k.event = TCPEV_RETRANSMIT_SYNACK;
	k.state = BPF_CORE_READ(sk, skc_state);
	if (in_scope(&k, netns_of_sk(sk)))
		count(&k, 1);
	return 0;
}

static __always_inline int on_send_reset(const void *skp, const void *skbp, __u32 reason)
{
	const struct sock_common___tcp *sk = skp;
	const struct sk_buff___tcp *skb = skbp;
	struct tcp_event_key k = {};
	__u32 netns = 0;
	/* A reset answering a segment (no socket, a listener, a mini socket)
	 * is keyed by that segment; an active reset (abort) by the socket. */
	if (skb) {
		if (!key_from_skb(&k, skb))
			return 0;
	} else if (sk) {
		key_from_sk(&k, sk, true); /* tcp_send_active_reset: a full socket */
	} else {
		return 0;
	}
	if (sk) {
		k.state = BPF_CORE_READ(sk, skc_state);
		netns = netns_of_sk(sk);
	} else {
		netns = BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);
	}
	k.event = TCPEV_RESET_SENT;
	k.detail = reason;
	if (in_scope(&k, netns))
		count(&k, 1);
	return 0;
}

static __always_inline int on_receive_reset(const void *skp)
{
	const struct sock_common___tcp *sk = skp;
	if (!sk)
		return 0;
	struct tcp_event_key k = {};
	key_from_sk(&k, sk, true);
	k.event = TCPEV_RESET_RECEIVED;
	k.state = BPF_CORE_READ(sk, skc_state);
	if (in_scope(&k, netns_of_sk(sk)))
		count(&k, 1);
	return 0;
}

enum { IPPROTO_TCP___tcpfeed = 6 };

/* This CPU's feed counts of a TCP socket of the target namespace and
 * port; 0 for any other socket or when no entry could be made. */
/* The feed counters of the socket whose inode is ino, created on first
 * use. */
static __always_inline struct tcp_feed *feed_by_inode(__u64 ino)
{
	if (!ino)
		return 0;
	struct tcp_feed *f = bpf_map_lookup_elem(&feeds, &ino);
	if (!f) {
		struct tcp_feed zero = {};
		bpf_map_update_elem(&feeds, &ino, &zero, BPF_NOEXIST);
		f = bpf_map_lookup_elem(&feeds, &ino);
		if (!f) {
			enum tcpevents_lost why = TCPEV_LOST_FEED;
			__u64 *l = bpf_map_lookup_elem(&lost, &why);
			if (l)
				(*l)++;
			return 0;
		}
	}
	return f;
}

static __always_inline struct tcp_feed *feed_of(const void *skp)
{
	const struct sock_common___tcp *sk = skp;
	if (!sk || BPF_CORE_READ((const struct sock___tcpfeed *)skp, sk_protocol) != IPPROTO_TCP___tcpfeed)
		return 0;
	if (target_port && BPF_CORE_READ(sk, skc_num) != target_port)
		return 0;
	if (netns_of_sk(sk) != target_netns)
		return 0;
	struct socket *sock = BPF_CORE_READ((const struct sock___tcpfeed *)skp, sk_socket);
	if (!sock)
		return 0;
	return feed_by_inode(BPF_CORE_READ(sock, file, f_inode, i_ino));
}

/* feed_of on tp_btf, where the socket is a typed kernel pointer: the same
 * fields read with plain loads (the verifier makes each a fault-safe
 * load) instead of a bpf_probe_read_kernel call each, seven a packet. */
static __always_inline struct tcp_feed *btf_feed_of(const struct sock *skp)
{
	const struct sock___tcpfeed *s = (const void *)skp;
	const struct sock_common___tcp *sk = (const void *)skp;
	if (!skp || s->sk_protocol != IPPROTO_TCP___tcpfeed)
		return 0;
	if (target_port && sk->skc_num != target_port)
		return 0;
	if (sk->skc_net.net->ns.inum != target_netns)
		return 0;
	struct socket *sock = s->sk_socket;
	if (!sock)
		return 0;
	return feed_by_inode(sock->file->f_inode->i_ino);
}

/* A receive that returned bytes counts a read of its connection. */
static __always_inline int count_read(struct tcp_feed *f, int ret)
{
	if (f && ret > 0)
		f->reads++;
	return 0;
}

static __always_inline int on_recv_length(const void *skp, int ret)
{
	return ret > 0 ? count_read(feed_of(skp), ret) : 0;
}

static __always_inline int count_feed(struct tcp_feed *f, const void *stack_marker)
{
	if (!f)
		return 0;
	switch (waiter_context(stack_marker)) {
	case CTX_SOFTIRQ:
		f->softirq++;
		break;
	case CTX_PROCESS:
		f->process++;
		break;
	default:
		f->unknown++;
	}
	return 0;
}

static __always_inline int on_data_ready(const void *skp, const void *stack_marker)
{
	return count_feed(feed_of(skp), stack_marker);
}

static __always_inline int btf_data_ready(const struct sock *sk, const void *stack_marker)
{
	return count_feed(btf_feed_of(sk), stack_marker);
}
SEC("tp_btf/sk_data_ready")
int BPF_PROG(btf_sk_data_ready, const struct sock *sk)
{ return SELF_COSTED(TCPEV_HOOK_DATA_READY, btf_data_ready(sk, ctx)); }
SEC("raw_tp/sk_data_ready")
int raw_sk_data_ready(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_DATA_READY, on_data_ready((void *)ctx->args[0], ctx)); }
static __always_inline int tp_data_ready(struct trace_event_raw_sk_data_ready *ctx)
{
	if (BPF_CORE_READ(ctx, protocol) != IPPROTO_TCP___tcpfeed)
		return 0;
	return on_data_ready(BPF_CORE_READ(ctx, skaddr), 0);
}
SEC("tracepoint/sock/sk_data_ready")
int tp_sk_data_ready(struct trace_event_raw_sk_data_ready *ctx)
{ return SELF_COSTED(TCPEV_HOOK_DATA_READY, tp_data_ready(ctx)); }

static __always_inline int btf_recv_length(const struct sock *sk, int ret)
{
	return ret > 0 ? count_read(btf_feed_of(sk), ret) : 0;
}
SEC("tp_btf/sock_recv_length")
int BPF_PROG(btf_sock_recv_length, const struct sock *sk, int ret)
{ return SELF_COSTED(TCPEV_HOOK_RECV_LENGTH, btf_recv_length(sk, ret)); }
SEC("raw_tp/sock_recv_length")
int raw_sock_recv_length(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RECV_LENGTH, on_recv_length((void *)ctx->args[0], (int)ctx->args[1])); }
static __always_inline int tp_recv_length(struct trace_event_raw_sock_msg_length *ctx)
{
	if (BPF_CORE_READ(ctx, protocol) != IPPROTO_TCP___tcpfeed)
		return 0;
	return on_recv_length(BPF_CORE_READ(ctx, sk), BPF_CORE_READ(ctx, ret));
}
SEC("tracepoint/sock/sock_recv_length")
int tp_sock_recv_length(struct trace_event_raw_sock_msg_length *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RECV_LENGTH, tp_recv_length(ctx)); }

/* tp_btf: the arguments from the raw context, so that the optional third
 * argument is only read where the prototype has it. */
static __always_inline int btf_retransmit(unsigned long long *ctx)
{
	return on_retransmit((void *)ctx[0], (void *)ctx[1], retransmit_has_err ? (int)ctx[2] : 0);
}
SEC("tp_btf/tcp_retransmit_skb")
int btf_tcp_retransmit_skb(unsigned long long *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SKB, btf_retransmit(ctx)); }
SEC("tp_btf/tcp_retransmit_synack")
int btf_tcp_retransmit_synack(unsigned long long *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SYNACK, on_retransmit_synack((void *)ctx[1])); }
static __always_inline int btf_send_reset(unsigned long long *ctx)
{
	return on_send_reset((void *)ctx[0], (void *)ctx[1], send_reset_has_reason ? (__u32)ctx[2] : 0);
}
SEC("tp_btf/tcp_send_reset")
int btf_tcp_send_reset(unsigned long long *ctx)
{ return SELF_COSTED(TCPEV_HOOK_SEND_RESET, btf_send_reset(ctx)); }
SEC("tp_btf/tcp_receive_reset")
int btf_tcp_receive_reset(unsigned long long *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RECEIVE_RESET, on_receive_reset((void *)ctx[0])); }

/* raw_tp: the same arguments as u64. */
static __always_inline int raw_retransmit(struct bpf_raw_tracepoint_args *ctx)
{
	return on_retransmit((void *)ctx->args[0], (void *)ctx->args[1], retransmit_has_err ? (int)ctx->args[2] : 0);
}
SEC("raw_tp/tcp_retransmit_skb")
int raw_tcp_retransmit_skb(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SKB, raw_retransmit(ctx)); }
SEC("raw_tp/tcp_retransmit_synack")
int raw_tcp_retransmit_synack(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SYNACK, on_retransmit_synack((void *)ctx->args[1])); }
static __always_inline int raw_send_reset(struct bpf_raw_tracepoint_args *ctx)
{
	return on_send_reset((void *)ctx->args[0], (void *)ctx->args[1], send_reset_has_reason ? (__u32)ctx->args[2] : 0);
}
SEC("raw_tp/tcp_send_reset")
int raw_tcp_send_reset(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_SEND_RESET, raw_send_reset(ctx)); }
SEC("raw_tp/tcp_receive_reset")
int raw_tcp_receive_reset(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RECEIVE_RESET, on_receive_reset((void *)ctx->args[0])); }

/* Classic tracepoints: the record carries the pointers. */
static __always_inline int tp_retransmit(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_tcp_retransmit_skb)) {
		struct trace_event_raw_tcp_retransmit_skb *r = ctx;
		int err = bpf_core_field_exists(r->err) ? BPF_CORE_READ(r, err) : 0;
		return on_retransmit(BPF_CORE_READ(r, skaddr), BPF_CORE_READ(r, skbaddr), err);
	}
	struct trace_event_raw_tcp_event_sk_skb *r = ctx;
	return on_retransmit(BPF_CORE_READ(r, skaddr), BPF_CORE_READ(r, skbaddr), 0);
}
SEC("tracepoint/tcp/tcp_retransmit_skb")
int tp_tcp_retransmit_skb(void *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SKB, tp_retransmit(ctx)); }
static __always_inline int tp_synack(struct trace_event_raw_tcp_retransmit_synack *ctx)
{
	return on_retransmit_synack(BPF_CORE_READ(ctx, req));
}
SEC("tracepoint/tcp/tcp_retransmit_synack")
int tp_tcp_retransmit_synack(struct trace_event_raw_tcp_retransmit_synack *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RETRANSMIT_SYNACK, tp_synack(ctx)); }
static __always_inline int tp_send_reset(void *ctx)
{
	if (bpf_core_type_exists(struct trace_event_raw_tcp_send_reset)) {
		struct trace_event_raw_tcp_send_reset *r = ctx;
		__u32 reason = bpf_core_field_exists(r->reason) ? BPF_CORE_READ(r, reason) : 0;
		return on_send_reset(BPF_CORE_READ(r, skaddr), BPF_CORE_READ(r, skbaddr), reason);
	}
	struct trace_event_raw_tcp_event_sk_skb *r = ctx;
	return on_send_reset(BPF_CORE_READ(r, skaddr), BPF_CORE_READ(r, skbaddr), 0);
}
SEC("tracepoint/tcp/tcp_send_reset")
int tp_tcp_send_reset(void *ctx)
{ return SELF_COSTED(TCPEV_HOOK_SEND_RESET, tp_send_reset(ctx)); }
static __always_inline int tp_receive_reset(struct trace_event_raw_tcp_event_sk *ctx)
{
	return on_receive_reset(BPF_CORE_READ(ctx, skaddr));
}
SEC("tracepoint/tcp/tcp_receive_reset")
int tp_tcp_receive_reset(struct trace_event_raw_tcp_event_sk *ctx)
{ return SELF_COSTED(TCPEV_HOOK_RECEIVE_RESET, tp_receive_reset(ctx)); }
