/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between lockstat.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_LOCKSTAT_TYPES_H
#define PERFSCOPE_LOCKSTAT_TYPES_H

/* Kernel frames per stack in the object; the loader resizes the stack map
 * to the depth the user asks for (unwinding stops there). */
enum { LOCKSTAT_MAX_DEPTH = 48 };

/* Stack ids a site can have besides bpf_get_stackid's. */
enum lockstat_stack {
	LOCKSTAT_STACK_NONE = -1,      /* the unwind failed (see lost) */
	LOCKSTAT_STACK_UNSAMPLED = -2, /* not sampled: see stack_every in lockstat.bpf.c */
};

/* Contentions not (fully) counted, by reason. */
enum lockstat_lost {
	LOCKSTAT_LOST_INFLIGHT_FULL = 0,   /* begin not recorded: in-flight map full */
	LOCKSTAT_LOST_SITE_FULL = 1,       /* per-site map full */
	LOCKSTAT_LOST_STACK_COLLISION = 2, /* bpf_get_stackid EEXIST (counted under stack -1) */
	LOCKSTAT_LOST_STACK_ERROR = 3,     /* bpf_get_stackid EFAULT or other (stack -1) */
	LOCKSTAT_LOST_LOCK_FULL = 4,       /* per-lock map insert failed */
	LOCKSTAT_LOST_OWNER_FULL = 5,      /* a socket lock's owner not recorded */
	LOCKSTAT_LOST_REASONS = 6,
};

/* Which lock of a socket a contended address is. */
enum lockstat_sock_field {
	LOCKSTAT_FIELD_NONE = 0,
	LOCKSTAT_FIELD_RECEIVE_QUEUE = 1, /* sock.sk_receive_queue.lock */
	LOCKSTAT_FIELD_READER_QUEUE = 2,  /* udp_sock.reader_queue.lock */
	LOCKSTAT_FIELD_SOCK_LOCK = 3,     /* sock.sk_lock.slock */
	LOCKSTAT_FIELD_WAIT_QUEUE = 4,    /* socket.wq.wait.lock (sock_def_readable's wakeup) */
};

/* Bits lockstat.bpf.c adds to inflight_wait.flags above the kernel's
 * LCB_F_* (which fit LOCKSTAT_LCB_MASK): the wait is on a TCP socket's
 * sk_lock.slock, and the waiter was serving a softirq. Never in a site key. */
enum {
	LOCKSTAT_LCB_MASK = 0xffff,
	LOCKSTAT_WAIT_TCP_SOCK_LOCK = 1 << 30,
	LOCKSTAT_WAIT_SOFTIRQ = 1 << 29,
	LOCKSTAT_WAIT_CONTEXT_UNKNOWN = 1 << 28,
};

/* The circumstances of one wait on a TCP socket's sk_lock.slock. */
enum lockstat_sock_wait {
	/* The waiter was serving a softirq (the receive path's
	 * bh_lock_sock, the TCP timers); else it ran in process context
	 * (lock_sock, lock_sock_fast, release_sock). */
	LOCKSTAT_SOCKWAIT_SOFTIRQ = 1 << 0,
	/* When the waiter got the spinlock, a process owned the socket
	 * (sk_lock.owned): a softirq then queues the segment to the
	 * socket's backlog; lock_sock sleeps until the owner's
	 * release_sock (and release_sock itself runs as the owner). */
	LOCKSTAT_SOCKWAIT_OWNED = 1 << 1,
	/* The waiter's context could not be told (see thread_size). */
	LOCKSTAT_SOCKWAIT_CONTEXT_UNKNOWN = 1 << 2,
};

struct sockwait_key {
	__u64 lock_addr;
	enum lockstat_sock_wait kind; /* its bits OR-ed */
	__u32 _pad;
};

/* A contention waiting now: one waiter (thread, or the CPU for the idle
 * task) on one lock. Softirqs nest inside a thread's contention on another
 * lock, hence the lock address in the key. */
struct inflight_key {
	__u64 lock_addr;
	__u32 waiter;
	__u32 _pad;
};

struct inflight_wait {
	__u64 start_ns;
	__u32 flags;    /* LCB_F_* of every begin seen for this wait, OR-ed */
	__s32 stack_id; /* taken at begin, see lockstat.bpf.c */
};

/* Spinning waits in flight on one CPU, innermost last. A spinning waiter
 * cannot sleep or migrate between begin and end, so its wait lives in a
 * per-CPU slot instead of the shared in-flight hash, whose insert cost
 * more than the rest of begin under the very contention it times. They
 * nest only by interrupts (task, softirq, hardirq, NMI), hence 4 slots. */
enum { LOCKSTAT_SPIN_NEST = 4 };

struct spin_wait {
	__u64 lock_addr;
	struct inflight_wait wait;
};

struct spin_waits {
	__u32 depth;
	__u32 _pad;
	struct spin_wait slot[LOCKSTAT_SPIN_NEST];
};

/* A call site: the waiter's kernel stack and the lock kind. */
struct site_key {
	__s32 stack_id; /* or enum lockstat_stack */
	__u32 flags;
};

/* The socket a contended lock belongs to, identified in the kernel when
 * the lock is first contended. Inodes are what /proc/net/udp, /proc/PID/fd
 * and /proc/PID/ns/net print, whatever kernel.kptr_restrict says. */
struct lock_owner {
	__u64 sock_inode;  /* SOCK_INODE(sk->sk_socket)->i_ino */
	__u32 netns_inode; /* sock_net(sk)->ns.inum; 0 without CONFIG_NET_NS */
	enum lockstat_sock_field field;
	__u16 port;        /* skc_num: local port, host order */
	__u16 family;      /* AF_INET or AF_INET6 */
	__u16 protocol;    /* IPPROTO_UDP, IPPROTO_UDPLITE or IPPROTO_TCP */
	__u16 _pad;
};

/* Per CPU (the maps are per-CPU). */
struct wait_stat {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum lockstat_hook {
	LOCKSTAT_HOOK_BEGIN,
	LOCKSTAT_HOOK_END,
};

#endif
