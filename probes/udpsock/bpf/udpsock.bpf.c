// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * udpsock: datagrams each UDP socket's owner read, keyed by the socket's
 * inode number, the key /proc/net/udp and /proc/PID/fd use, so user space
 * joins the counts to sockets, ports and processes without kernel
 * addresses (which root sees only with kernel.kptr_restrict=1).
 *
 *   sock:sock_recv_length (6.6+)  after every sock_recvmsg: the socket and
 *                                 what the call returned
 *
 * A recvmsg/recvfrom/recvmmsg (one event per datagram) that returned >= 0
 * bytes read one datagram (0 is an empty datagram); errors (EAGAIN from
 * non-blocking readers) and MSG_PEEK/MSG_ERRQUEUE reads are not datagrams
 * taken from the receive queue. Only UDP sockets of one network namespace
 * (and of one local port, when set) are counted: the tracepoint fires for
 * every socket read on the machine, so the tests run cheapest first (ret,
 * flags, protocol, port, namespace) before the inode walk. The inode is
 * sk->sk_socket->file->f_inode->i_ino, the same inode SOCK_INODE() names,
 * reached through pointers the verifier can type instead of container_of
 * arithmetic. This runs in the reader's own recvmsg, on the path a UDP
 * server is usually bound by, so the count avoids a hash lookup: a
 * direct-mapped per-CPU table (slot = inode mod UDPSOCK_SLOTS, each slot
 * remembering its inode) takes the first socket of each slot, which is
 * every socket when a server has a few; a socket whose slot another socket
 * took goes to a per-CPU hash. Every CPU maps an inode to the same slot;
 * user space adds slot and hash counts by inode.
 *
 *   sock:sk_data_ready (6.7+)     when a datagram is queued and the reader
 *                                 is woken, on the CPU that queued it
 *
 * Counted per socket in a per-CPU map, so the CPU dimension is the CPU whose
 * softirq fed the socket: a reuseport group steered by CPU has one CPU per
 * socket, a group chosen by flow hash has every socket fed by every CPU.
 * Since 6.13 UDP calls it only when the receive queue was empty, so these
 * are wakeups (a sample of the enqueues), read as shares, not as counts.
 *
 * Two per-CPU totals: the datagrams read from the counted sockets, and those
 * read from any UDP socket of the namespace, whatever its port: the
 * datagrams Udp/Udp6 InDatagrams count. Under perfscope's overhead budget
 * the hooks are attached in sampling windows only, and the reads outside
 * them are estimated as the counted sockets' share of the namespace's
 * InDatagrams; counted here by the same program at the same instants, that
 * share carries no error from where a window began or ended (1 exactly when
 * the port is the namespace's only reader).
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "access.h"
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum udpsock_hook);

/* Inode of the network namespace whose sockets are counted. */
const volatile __u32 target_netns = 0;
/* Only count sockets bound to this local port (0: every port). */
const volatile __u16 target_port = 0;
/* Slot of an inode in read_slots: ino & slot_mask. Tests set 0 to send
 * every socket but the first to the hash. */
const volatile __u32 slot_mask = UDPSOCK_SLOTS - 1;

enum {
	MSG_PEEK = 0x2,
	MSG_ERRQUEUE = 0x2000,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPSOCK_SLOTS);
	__type(key, __u32);
	__type(value, struct sock_slot);
} read_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct sock_reads);
} reads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} wakeups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPSOCK_LOST_REASONS);
	__type(key, enum udpsock_lost);
	__type(value, __u64);
} lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UDPSOCK_TOTALS);
	__type(key, enum udpsock_total);
	__type(value, __u64);
} totals SEC(".maps");

static __always_inline void count_total(enum udpsock_total what)
{
	__u64 *n = bpf_map_lookup_elem(&totals, &what);
	if (n)
		(*n)++;
}

/* The local port of sk when it is a UDP socket of network namespace netns;
 * -1 otherwise (udp_port_in without the port: every read of the namespace
 * is counted in its total before the port is tested). */
static __always_inline int udp_in_netns(const struct sock *sk, __u32 netns, const bool direct)
{
	return udp_port_in(sk, netns, 0, direct);
}

static __always_inline void count_lost(enum udpsock_lost why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);
	if (n)
		(*n)++;
}

/* The socket's inode number, 0 when it has no file (kernel sockets). */
static __always_inline __u64 sock_inode(const struct sock *sk, const bool direct)
{
	struct socket *sock = READ(direct, sk, sk_socket);
	if (!sock)
		return 0;
	struct file *file = READ(direct, sock, file);
	if (!file)
		return 0;
	struct inode *inode = READ(direct, file, f_inode);
	if (!inode)
		return 0;
	return READ(direct, inode, i_ino);
}

static __always_inline int on_recv(const struct sock *sk, int ret, int flags, const bool direct)
{
	if (ret < 0 || (flags & (MSG_PEEK | MSG_ERRQUEUE)) || !sk)
		return 0;
	int local = udp_in_netns(sk, target_netns, direct);
	if (local < 0)
		return 0;
	count_total(UDPSOCK_TOTAL_NS_READS);
	if (target_port && local != target_port)
		return 0;
	__u64 ino = sock_inode(sk, direct);
	if (!ino)
		return 0;
	count_total(UDPSOCK_TOTAL_READS);
	__u32 idx = ino & slot_mask;
	struct sock_slot *slot = bpf_map_lookup_elem(&read_slots, &idx);
	if (slot && (slot->ino == ino || slot->ino == 0)) {
		slot->ino = ino;
		slot->reads.datagrams++;
		slot->reads.bytes += ret;
		return 0;
	}
	struct sock_reads *r = bpf_map_lookup_elem(&reads, &ino);
	if (r) {
		r->datagrams++;
		r->bytes += ret;
		return 0;
	}
	/* A per-CPU hash insert sets this CPU's value and zeroes the others.
	 * EEXIST: another CPU inserted the key meanwhile. */
	struct sock_reads first = { .datagrams = 1, .bytes = ret };
	if (bpf_map_update_elem(&reads, &ino, &first, BPF_NOEXIST) == 0)
		return 0;
	r = bpf_map_lookup_elem(&reads, &ino);
	if (r) {
		r->datagrams++;
		r->bytes += ret;
		return 0;
	}
	count_lost(UDPSOCK_LOST_SOCKET);
	return 0;
}

static __always_inline int on_data_ready(const struct sock *sk, const bool direct)
{
	if (!sk || udp_port_in(sk, target_netns, target_port, direct) < 0)
		return 0;
	__u64 ino = sock_inode(sk, direct);
	if (!ino)
		return 0;
	/* The same slot as the socket's reads: one array lookup, no hash. */
	__u32 idx = ino & slot_mask;
	struct sock_slot *slot = bpf_map_lookup_elem(&read_slots, &idx);
	if (slot && (slot->ino == ino || slot->ino == 0)) {
		slot->ino = ino;
		slot->wakeups++;
		return 0;
	}
	__u64 *n = bpf_map_lookup_elem(&wakeups, &ino);
	if (n) {
		(*n)++;
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&wakeups, &ino, &one, BPF_NOEXIST) == 0)
		return 0;
	n = bpf_map_lookup_elem(&wakeups, &ino);
	if (n)
		(*n)++;
	else
		count_lost(UDPSOCK_LOST_WAKEUP);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(btf_sock_recv_length, struct sock *sk, int ret, int flags) { return SELF_COSTED(UDPSOCK_HOOK_RECV_LENGTH, on_recv(sk, ret, flags, true)); }

SEC("raw_tp/sock_recv_length")
int raw_sock_recv_length(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(UDPSOCK_HOOK_RECV_LENGTH, on_recv((void *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2], false)); }

/* The record carries the protocol, so other sockets are rejected before
 * any probe read. */
static __always_inline int tp_recv(struct trace_event_raw_sock_msg_length *ctx)
{
	if (ctx->protocol != PERFSCOPE_IPPROTO_UDP)
		return 0;
	return on_recv(ctx->sk, ctx->ret, ctx->flags, false);
}
SEC("tracepoint/sock/sock_recv_length")
int tp_sock_recv_length(struct trace_event_raw_sock_msg_length *ctx)
{ return SELF_COSTED(UDPSOCK_HOOK_RECV_LENGTH, tp_recv(ctx)); }

SEC("tp_btf/sk_data_ready")
int BPF_PROG(btf_sk_data_ready, const struct sock *sk) { return SELF_COSTED(UDPSOCK_HOOK_DATA_READY, on_data_ready(sk, true)); }

SEC("raw_tp/sk_data_ready")
int raw_sk_data_ready(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(UDPSOCK_HOOK_DATA_READY, on_data_ready((void *)ctx->args[0], false)); }

static __always_inline int tp_data_ready(struct trace_event_raw_sk_data_ready *ctx)
{
	if (ctx->protocol != PERFSCOPE_IPPROTO_UDP)
		return 0;
	return on_data_ready(ctx->skaddr, false);
}
SEC("tracepoint/sock/sk_data_ready")
int tp_sk_data_ready(struct trace_event_raw_sk_data_ready *ctx)
{ return SELF_COSTED(UDPSOCK_HOOK_DATA_READY, tp_data_ready(ctx)); }
