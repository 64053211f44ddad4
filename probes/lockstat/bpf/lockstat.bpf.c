// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * lockstat: kernel lock contention from lock:contention_begin/end (5.19+).
 *
 * contention_end runs with the lock already held, so anything done there
 * lengthens the very critical section others are queued on: measured on a
 * loopback UDP flood, unwinding the stack at end cost 3.4 µs per
 * contention and 28 % of the throughput. The stack is therefore taken at
 * begin, while this CPU only waits, and end does two lookups and a delete.
 *
 * Even at begin the unwind (~3-4 µs) was half of what `perfscope udp` cost
 * a flood, so it is sampled: the stack is taken for about 1 in stack_every
 * contentions. Every contention is still timed and counted, so the per-lock
 * counts (and the socket identification) stay exact; an unsampled one is
 * counted per site under LOCKSTAT_STACK_UNSAMPLED with its lock flags. User
 * space then scales each sampled site by its lock kind's ratio of all to
 * sampled (count and wait separately), which makes per-site and per-class
 * numbers estimates whose sums per lock kind are the exact totals. The gap
 * between two samples on a CPU is drawn uniformly from 1..2N-1 (mean N)
 * rather than fixed: a CPU that alternates between two locks (the reader
 * dequeuing, then sleeping on the wakeup lock) would otherwise always be
 * sampled on the same one when N is even.
 *
 * Each contention is timed from its first begin to its end and counted
 * twice: per call site (the waiter's kernel stack id × lock flags) for
 * "where", and per lock address for "which object". The first time a lock
 * address is counted, it is checked against the locks of a socket (see
 * identify_owner) and, if it is one, the socket's port and inodes are
 * recorded: user space cannot do this from the address alone, because
 * /proc/net/udp shows socket addresses only with kernel.kptr_restrict=1.
 * Only aggregates cross to user space.
 *
 * A TCP socket's sk_lock.slock is taken from both sides of the socket: a
 * process (lock_sock, lock_sock_fast, release_sock) and a softirq (the
 * receive path's bh_lock_sock, the TCP timers). Its waits are counted a
 * third time, per lock address by the waiter's context and by whether a
 * process owned the socket (sk_lock.owned) once the waiter got the
 * spinlock: read at end, under the spinlock, it is exactly what the waiter
 * acts on next — a softirq queues the segment to the backlog, lock_sock
 * sleeps for the owner. That sleep (__lock_sock, on sk_lock.wq) is no
 * contention event, so only its start is seen here, never its length.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"
#include "sock.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum lockstat_hook);

enum { E_FAULT = 14, E_EXIST = 17 };

/* Take the stack of about 1 in stack_every contentions (1: every one). */
const volatile __u32 stack_every = 1;

/* The size of a task's kernel stack (THREAD_SIZE), set by user space where
 * the waiter's context is told by the stack it runs on (x86-64: softirqs
 * run on the CPU's IRQ stack, or in ksoftirqd); 0: not told, counted as
 * unknown. The per-CPU preempt count would say it directly, but its
 * address is a data symbol: without CONFIG_KALLSYMS_ALL neither the
 * loader nor the verifier (a BTF ksym's address comes from kallsyms) can
 * resolve it. */
const volatile __u32 thread_size = 0;
#include "softirqctx.h"

enum { AF_INET = 2, AF_INET6 = 10 };
enum { IPPROTO_TCP = 6, IPPROTO_UDP = 17, IPPROTO_UDPLITE = 136 };

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct inflight_key);
	__type(value, struct inflight_wait);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64[LOCKSTAT_MAX_DEPTH]);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct site_key);
	__type(value, struct wait_stat);
} sites SEC(".maps");

/* LRU: the busiest lock addresses stay; an evicted quiet lock loses its
 * history, which the per-site counts still hold. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct wait_stat);
} locks SEC(".maps");

/* The socket of each contended socket lock, by lock address. Written once
 * per address (when it enters `locks`), so an LRU the size of `locks` keeps
 * every owner `locks` can still report. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct lock_owner);
} owners SEC(".maps");

/* Waits on TCP sockets' sk_lock.slock by circumstance (see the top). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sockwait_key);
	__type(value, struct wait_stat);
} sockwaits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOCKSTAT_LOST_REASONS);
	__type(key, enum lockstat_lost);
	__type(value, __u64);
} lost SEC(".maps");

/* Per CPU: the spinning waits in flight (see struct spin_waits). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct spin_waits);
} spinning SEC(".maps");

/* Per CPU: contentions left until the next one whose stack is taken. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stack_countdown SEC(".maps");

static __always_inline void count_lost(enum lockstat_lost why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);
	if (n)
		(*n)++;
}

static __always_inline struct inflight_key waiter_key(__u64 lock_addr)
{
	struct inflight_key key = { .lock_addr = lock_addr };
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	/* Every CPU's idle task is tid 0, and their softirqs contend on the
	 * same locks at once: tell them apart by CPU (tids are < 2^22). The
	 * idle task never sleeps on a lock, so it cannot migrate mid-wait. */
	key.waiter = tid ? tid : (0x80000000u | bpf_get_smp_processor_id());
	return key;
}

static __always_inline bool sample_stack(void)
{
	if (stack_every <= 1)
		return true;
	__u32 zero = 0;
	__u32 *left = bpf_map_lookup_elem(&stack_countdown, &zero);
	if (!left)
		return true;
	if (*left > 1) {
		(*left)--;
		return false;
	}
	*left = 1 + bpf_get_prandom_u32() % (2 * stack_every - 1);
	return true;
}

static __always_inline __s32 stack_id(void *ctx)
{
	if (!sample_stack())
		return LOCKSTAT_STACK_UNSAMPLED;
	long id = bpf_get_stackid(ctx, &stacks, 0);
	if (id < 0) {
		count_lost(id == -E_EXIST ? LOCKSTAT_LOST_STACK_COLLISION : LOCKSTAT_LOST_STACK_ERROR);
		return LOCKSTAT_STACK_NONE;
	}
	return id;
}

/* LCB_F_* flags (include/trace/events/lock.h). */
enum { LCB_F_SPIN = 1 << 0, LCB_F_RT = 1 << 3, LCB_F_PERCPU = 1 << 4, LCB_F_MUTEX = 1 << 5 };

/* A spinlock or rwlock waiter spins with preemption off from begin to end;
 * a mutex (even in its optimistic spin, which can turn into a sleep), an
 * rwsem, an rt_mutex or a percpu rwsem may sleep and wake on another CPU. */
static __always_inline bool spins_in_place(__u32 flags)
{
	return (flags & LCB_F_SPIN) && !(flags & (LCB_F_MUTEX | LCB_F_RT | LCB_F_PERCPU));
}

static __always_inline struct spin_waits *cpu_spinning(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&spinning, &zero);
}

/* The bits a wait on a TCP socket's sk_lock.slock adds to its flags. The
 * lock is known to be one from the owner recorded at the end of its first
 * contention: the waits begun before that (one per CPU at most) are
 * counted in `locks` only. */
static __always_inline __u32 tcp_sock_lock_bits(__u64 lock_addr, const void *stack_marker)
{
	struct lock_owner *o = bpf_map_lookup_elem(&owners, &lock_addr);
	if (!o || o->field != LOCKSTAT_FIELD_SOCK_LOCK || o->protocol != IPPROTO_TCP)
		return 0;
	switch (waiter_context(stack_marker)) {
	case CTX_SOFTIRQ:
		return LOCKSTAT_WAIT_TCP_SOCK_LOCK | LOCKSTAT_WAIT_SOFTIRQ;
	case CTX_PROCESS:
		return LOCKSTAT_WAIT_TCP_SOCK_LOCK;
	default:
		return LOCKSTAT_WAIT_TCP_SOCK_LOCK | LOCKSTAT_WAIT_CONTEXT_UNKNOWN;
	}
}

static __always_inline int begin_spin(void *ctx, __u64 lock_addr, __u32 flags)
{
	struct spin_waits *sw = cpu_spinning();
	if (!sw)
		return 0;
	__u32 d = sw->depth;
	if (d >= LOCKSTAT_SPIN_NEST) {
		/* Real nesting stops at 4 (task, softirq, hardirq, NMI): a full
		 * nest holds waits whose end never ran a program (an end that
		 * fired inside this probe's own end handler is skipped by the
		 * kernel's recursion guard). Forget them. */
		count_lost(LOCKSTAT_LOST_INFLIGHT_FULL);
		d = 0;
	}
	struct spin_wait *w = &sw->slot[d & (LOCKSTAT_SPIN_NEST - 1)];
	w->lock_addr = lock_addr;
	w->wait.flags = flags;
	w->wait.stack_id = stack_id(ctx);
	w->wait.start_ns = bpf_ktime_get_ns(); /* after any unwind: time the wait, not us */
	sw->depth = d + 1;
	return 0;
}

/* stack_marker: an address on the waiter's kernel stack, or 0 (a classic
 * tracepoint's context is a per-CPU buffer): see softirqctx.h. */
static __always_inline int on_begin(void *ctx, const void *stack_marker, __u64 lock_addr, __u32 flags)
{
	flags &= LOCKSTAT_LCB_MASK;
	if (spins_in_place(flags))
		return begin_spin(ctx, lock_addr, flags | tcp_sock_lock_bits(lock_addr, stack_marker));

	struct inflight_key key = waiter_key(lock_addr);
	struct inflight_wait *w = bpf_map_lookup_elem(&inflight, &key);
	if (w) {
		/* A mutex reports begin twice (optimistic spin, then sleep):
		 * keep the first start so the whole wait is timed. */
		w->flags |= flags;
		return 0;
	}
	struct inflight_wait v = { .flags = flags, .stack_id = stack_id(ctx) };
	v.start_ns = bpf_ktime_get_ns(); /* after any unwind: time the wait, not us */
	if (bpf_map_update_elem(&inflight, &key, &v, BPF_NOEXIST))
		count_lost(LOCKSTAT_LOST_INFLIGHT_FULL);
	return 0;
}

/* Ends this CPU's innermost spinning wait on lock_addr into *out, dropping
 * any wait above it (nesting is last in, first out: those never ended).
 * False if this CPU is not spinning on it. */
static __always_inline bool end_spin(__u64 lock_addr, struct inflight_wait *out)
{
	struct spin_waits *sw = cpu_spinning();
	if (!sw)
		return false;
	__u32 d = sw->depth;
	for (int k = 1; k <= LOCKSTAT_SPIN_NEST; k++) {
		if (k > d)
			return false;
		struct spin_wait *w = &sw->slot[(d - k) & (LOCKSTAT_SPIN_NEST - 1)];
		if (w->lock_addr == lock_addr) {
			*out = w->wait;
			sw->depth = d - k;
			return true;
		}
	}
	return false;
}

static __always_inline void add_wait(struct wait_stat *s, __u64 wait)
{
	s->count++;
	s->total_ns += wait;
	if (wait > s->max_ns)
		s->max_ns = wait;
}

/* A live socket's struct socket points back at it: a candidate address
 * that is not a struct sock fails this (its reads fail or mismatch), which
 * is what makes guessing the container from the lock's offset safe. */
static __always_inline struct socket___lockstat *socket_of(struct sock___lockstat *sk)
{
	struct socket___lockstat *sock = 0;
	struct sock___lockstat *back = 0;

	if (bpf_core_read(&sock, sizeof(sock), &sk->sk_socket) || !sock)
		return 0;
	if (bpf_core_read(&back, sizeof(back), &sock->sk) || back != sk)
		return 0;
	return sock;
}

/* Fills o from a verified socket; false unless it is an inet socket of a
 * protocol perfscope reports. reader_queue exists only in struct udp_sock,
 * so a match at its offset counts only for UDP. */
static __always_inline bool describe(struct sock___lockstat *sk, struct socket___lockstat *sock,
				     enum lockstat_sock_field field, struct lock_owner *o)
{
	if (bpf_core_read(&o->family, sizeof(o->family), &sk->__sk_common.skc_family) ||
	    (o->family != AF_INET && o->family != AF_INET6))
		return false;
	if (bpf_core_read(&o->protocol, sizeof(o->protocol), &sk->sk_protocol))
		return false;
	bool udp = o->protocol == IPPROTO_UDP || o->protocol == IPPROTO_UDPLITE;
	if (!udp && (o->protocol != IPPROTO_TCP || field == LOCKSTAT_FIELD_READER_QUEUE))
		return false;
	o->field = field;
	bpf_core_read(&o->port, sizeof(o->port), &sk->__sk_common.skc_num);

	struct socket_alloc___lockstat *alloc =
		(void *)((__u64)sock - bpf_core_field_offset(struct socket_alloc___lockstat, socket));
	unsigned long ino = 0;
	bpf_core_read(&ino, sizeof(ino), &alloc->vfs_inode.i_ino);
	o->sock_inode = ino;

	if (bpf_core_field_exists(sk->__sk_common.skc_net.net)) {
		struct net___lockstat *net = 0;
		if (!bpf_core_read(&net, sizeof(net), &sk->__sk_common.skc_net.net) && net)
			bpf_core_read(&o->netns_inode, sizeof(o->netns_inode), &net->ns.inum);
	}
	return true;
}

/* Is the lock at addr one of a socket's? Tries each lock a UDP socket's
 * receive path contends on: the container is addr minus the lock's offset
 * (CO-RE, from the running kernel's BTF), verified by its back pointer.
 * A few failed reads for any other lock; run once per lock address. */
static __always_inline bool identify_owner(__u64 addr, struct lock_owner *o)
{
	struct sock___lockstat *sk;
	struct socket___lockstat *sock;

	sk = (void *)(addr - bpf_core_field_offset(struct sock___lockstat, sk_receive_queue.lock));
	if ((sock = socket_of(sk)))
		return describe(sk, sock, LOCKSTAT_FIELD_RECEIVE_QUEUE, o);

	if (bpf_core_field_exists(struct udp_sock___lockstat, reader_queue)) {
		sk = (void *)(addr - bpf_core_field_offset(struct udp_sock___lockstat, reader_queue.lock));
		if ((sock = socket_of(sk)))
			return describe(sk, sock, LOCKSTAT_FIELD_READER_QUEUE, o);
	}

	sk = (void *)(addr - bpf_core_field_offset(struct sock___lockstat, sk_lock.slock));
	if ((sock = socket_of(sk)))
		return describe(sk, sock, LOCKSTAT_FIELD_SOCK_LOCK, o);

	/* The wait queue is in struct socket: verify socket->sk->sk_socket. */
	sock = (void *)(addr - bpf_core_field_offset(struct socket___lockstat, wq.wait.lock));
	sk = 0;
	if (bpf_core_read(&sk, sizeof(sk), &sock->sk) || !sk || socket_of(sk) != sock)
		return false;
	return describe(sk, sock, LOCKSTAT_FIELD_WAIT_QUEUE, o);
}

/* Records (or forgets: the address may have been a socket's before its
 * entry in `locks` was evicted) the owner of a lock entering `locks`. */
static __always_inline void note_owner(__u64 addr)
{
	struct lock_owner o = {};
	if (!identify_owner(addr, &o)) {
		bpf_map_delete_elem(&owners, &addr);
		return;
	}
	if (bpf_map_update_elem(&owners, &addr, &o, BPF_ANY))
		count_lost(LOCKSTAT_LOST_OWNER_FULL);
}

/* Counts a wait on a TCP socket's sk_lock.slock, which this CPU now holds:
 * sk_lock.owned cannot change under it. */
static __always_inline void count_sock_wait(__u64 lock_addr, __u32 flags, __u64 wait)
{
	struct sock___lockstat *sk =
		(void *)(lock_addr - bpf_core_field_offset(struct sock___lockstat, sk_lock.slock));
	int owned = 0;
	struct sockwait_key key = { .lock_addr = lock_addr };
	if (flags & LOCKSTAT_WAIT_SOFTIRQ)
		key.kind |= LOCKSTAT_SOCKWAIT_SOFTIRQ;
	if (flags & LOCKSTAT_WAIT_CONTEXT_UNKNOWN)
		key.kind |= LOCKSTAT_SOCKWAIT_CONTEXT_UNKNOWN;
	if (!bpf_core_read(&owned, sizeof(owned), &sk->sk_lock.owned) && owned)
		key.kind |= LOCKSTAT_SOCKWAIT_OWNED;

	struct wait_stat *s = bpf_map_lookup_elem(&sockwaits, &key);
	if (!s) {
		struct wait_stat zero = {};
		bpf_map_update_elem(&sockwaits, &key, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&sockwaits, &key);
	}
	if (s)
		add_wait(s, wait);
	else
		count_lost(LOCKSTAT_LOST_LOCK_FULL);
}

static __always_inline int on_end(__u64 lock_addr)
{
	__u64 now = bpf_ktime_get_ns();
	struct inflight_wait began;
	if (!end_spin(lock_addr, &began)) {
		struct inflight_key key = waiter_key(lock_addr);
		struct inflight_wait *w = bpf_map_lookup_elem(&inflight, &key);
		if (!w)
			return 0; /* began before the probe attached */
		began = *w;
		bpf_map_delete_elem(&inflight, &key);
	}
	__u64 wait = now - began.start_ns;
	struct site_key site = { .stack_id = began.stack_id, .flags = began.flags & LOCKSTAT_LCB_MASK };
	if (began.flags & LOCKSTAT_WAIT_TCP_SOCK_LOCK)
		count_sock_wait(lock_addr, began.flags, wait);

	struct wait_stat zero = {};
	struct wait_stat *s = bpf_map_lookup_elem(&sites, &site);
	if (!s) {
		bpf_map_update_elem(&sites, &site, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&sites, &site);
	}
	if (s)
		add_wait(s, wait);
	else
		count_lost(LOCKSTAT_LOST_SITE_FULL);

	s = bpf_map_lookup_elem(&locks, &lock_addr);
	if (!s) {
		/* First contention on this address (or first since eviction):
		 * the one time its owner is looked for. */
		if (!bpf_map_update_elem(&locks, &lock_addr, &zero, BPF_NOEXIST))
			note_owner(lock_addr);
		s = bpf_map_lookup_elem(&locks, &lock_addr);
	}
	if (s)
		add_wait(s, wait);
	else
		count_lost(LOCKSTAT_LOST_LOCK_FULL);
	return 0;
}

SEC("tp_btf/contention_begin")
int BPF_PROG(btf_contention_begin, void *lock, unsigned int flags) { return SELF_COSTED(LOCKSTAT_HOOK_BEGIN, on_begin(ctx, ctx, (__u64)lock, flags)); }
SEC("tp_btf/contention_end")
int BPF_PROG(btf_contention_end, void *lock, int ret) { return SELF_COSTED(LOCKSTAT_HOOK_END, on_end((__u64)lock)); }

SEC("raw_tp/contention_begin")
int raw_contention_begin(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(LOCKSTAT_HOOK_BEGIN, on_begin(ctx, ctx, ctx->args[0], (__u32)ctx->args[1])); }
SEC("raw_tp/contention_end")
int raw_contention_end(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(LOCKSTAT_HOOK_END, on_end(ctx->args[0])); }

SEC("tracepoint/lock/contention_begin")
int tp_contention_begin(struct trace_event_raw_contention_begin *ctx)
{ return SELF_COSTED(LOCKSTAT_HOOK_BEGIN, on_begin(ctx, 0, (__u64)ctx->lock_addr, ctx->flags)); }
SEC("tracepoint/lock/contention_end")
int tp_contention_end(struct trace_event_raw_contention_end *ctx) { return SELF_COSTED(LOCKSTAT_HOOK_END, on_end((__u64)ctx->lock_addr)); }
