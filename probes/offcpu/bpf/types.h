/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between offcpu.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_OFFCPU_TYPES_H
#define PERFSCOPE_OFFCPU_TYPES_H

/* PERF_MAX_STACK_DEPTH: the deepest stack bpf_get_stack records. */
enum { OFFCPU_MAX_DEPTH = 127 };
enum { OFFCPU_COMM_LEN = 16 };
/* Slots of a run-queue latency histogram: slot k counts latencies in
 * [2^k, 2^(k+1)) ns (slot 0 also 0 ns); the last slot is open-ended
 * (2^39 ns is about nine minutes). */
enum { OFFCPU_HIST_SLOTS = 40 };

/* One stack, leaf first, zero after the last frame. */
struct stack_frames {
	__u64 ips[OFFCPU_MAX_DEPTH];
};

/* The state a thread left the CPU in, from sched_switch's prev_state. */
enum offcpu_state {
	OFFCPU_RUNNABLE = 0,        /* preempted (or yielded) while runnable: R */
	OFFCPU_SLEEPING = 1,        /* interruptible sleep: S */
	OFFCPU_UNINTERRUPTIBLE = 2, /* uninterruptible, usually disk I/O: D */
	OFFCPU_IDLE = 3,            /* TASK_IDLE, a kernel thread with no work: I */
	OFFCPU_OTHER = 4,           /* stopped, traced, parked */
	OFFCPU_STATES = 5,
	OFFCPU_DEAD = 6,            /* its last switch: never an off-CPU wait */
};

/* What a run-queue wait followed. */
enum offcpu_runq_kind {
	OFFCPU_RUNQ_WAKEUP = 0,    /* woken (or created) -> ran: bcc runqlat's wakeup latency */
	OFFCPU_RUNQ_PREEMPTED = 1, /* preempted -> ran again */
	OFFCPU_RUNQ_KINDS = 2,
};

/* Words of a thread's user registers that identify where it waits: the
 * instruction and stack pointers it entered the kernel with, its frame
 * pointer, the two return addresses above it, the system call and its
 * first argument (the fd, the futex). */
enum { OFFCPU_USER_KEY = 7 };

/* The waker stacks walked for a waker thread waking a thread from one
 * user call (waker_cache). */
struct waker_cache_key {
	__u32 waker_pid;
	__u32 wakee_pid;
	__u64 regs[OFFCPU_USER_KEY];
};

struct waker_cache_val {
	__u64 kernel_stack;
	__u64 user_stack;
	__u32 halves;
	__u32 _pad;
};

/* Bits of thread_state.halves and wait_key.halves. */
enum offcpu_half {
	OFFCPU_HALF_KERNEL = 1,        /* kernel_stack is set */
	OFFCPU_HALF_USER = 2,          /* user_stack is set */
	OFFCPU_WAKER_KNOWN = 4,        /* waker_* name who woke the thread */
	OFFCPU_WAKER_KERNEL = 8,       /* waker_kernel_stack is set */
	OFFCPU_WAKER_USER = 16,        /* waker_user_stack is set */
};

/* Who woke a sleeping thread, recorded at sched_waking in the waker's
 * context. pid 0: the idle task, i.e. an interrupt or softirq that ran on
 * an idle CPU (its kernel stack says which). */
struct waker {
	__u64 kernel_stack;
	__u64 user_stack;
	__u32 pid;  /* thread id */
	__u32 tgid; /* process id */
	__u32 halves; /* OFFCPU_WAKER_* bits */
	__u32 _pad;
	char comm[OFFCPU_COMM_LEN];
};

/* What one thread did since the probe was loaded (cumulative). */
struct thread_totals {
	__u64 on_ns;                              /* on CPU */
	__u64 runq_ns[OFFCPU_RUNQ_KINDS];         /* runnable, waiting for a CPU */
	__u64 runq_count[OFFCPU_RUNQ_KINDS];
	__u64 blocked_ns[OFFCPU_STATES];          /* off CPU and not runnable, by state left in */
	__u64 switches[OFFCPU_STATES];            /* switch-outs by state left in */
	__u64 before_ns;   /* off CPU since before the window, until first seen: state unknown */
	__u64 waits;       /* off-CPU intervals timed (switch-out to switch-in) */
	__u64 short_waits; /* of them shorter than min_block_ns: not in waits */
	__u64 short_ns;
};

/* One thread, keyed by its id in the threads map. Timestamps are
 * bpf_ktime_get_ns() (CLOCK_MONOTONIC); 0: none. */
struct thread_state {
	__u64 off_ns;      /* switched out at */
	__u64 on_ns;       /* switched in at */
	__u64 runnable_ns; /* runnable since: woken, or preempted (= off_ns) */
	__u64 kernel_stack; /* stacks at the switch-out, valid per halves */
	__u64 user_stack;
	struct waker waker;
	__u32 epoch;  /* the window the in-flight times above belong to */
	__u32 tgid;
	__u8 state;   /* enum offcpu_state at off_ns */
	__u8 halves;  /* OFFCPU_HALF_* */
	__u8 sampled; /* stacks were taken at this switch-out (see stack_every) */
	__u8 dead;    /* the thread exited */
	__u32 _pad;
	char comm[OFFCPU_COMM_LEN];
	/* The user registers at the switch-out (see user_regs_update) and
	 * whether they were those of the one before (site: 1 yes, 0 no, -1
	 * unreadable); the user stack last walked, and the kernel stack last
	 * walked at a switch-in with the kernel stack pointer it was taken
	 * at (see switch_in). */
	__u64 walked_regs[OFFCPU_USER_KEY];
	__u64 walked_user_stack;
	__u64 walked_kernel_stack;
	__u64 walked_kernel_sp;
	__s32 site;
	__u32 _pad2;
	struct thread_totals totals;
};

/* One aggregation bucket of off-CPU waits at least min_block_ns long: a
 * thread, the stacks it left the CPU with, the state, and who woke it.
 * No padding: the map hashes every byte. */
struct wait_key {
	__u64 kernel_stack;
	__u64 user_stack;
	__u64 waker_kernel_stack;
	__u64 waker_user_stack;
	__u32 pid;
	__u32 tgid;
	__u32 waker_pid;
	__u32 waker_tgid;
	__u8 state;
	__u8 halves; /* OFFCPU_HALF_* and OFFCPU_WAKER_* */
	__u8 _pad[6];
	char waker_comm[OFFCPU_COMM_LEN];
};

struct wait_stat {
	__u64 count;
	__u64 total_ns; /* switch-out to switch-in */
	__u64 runq_ns;  /* of it runnable (after the wakeup, or preempted) */
	__u64 max_ns;
};

/* A log2 histogram of run-queue latencies. */
struct hist {
	__u64 slots[OFFCPU_HIST_SLOTS];
	__u64 count;
	__u64 sum_ns;
};

struct proc_key {
	__u32 tgid;
	enum offcpu_runq_kind kind;
};

/* config[0], written by user space. epoch 0: not counting yet. A new epoch
 * (a new window, or the hooks attached again after a gap) makes every
 * in-flight time of an older one stale. */
struct offcpu_config {
	__u64 window_start_ns;
	__u32 epoch;
	__u32 _pad;
};

/* Why an event was not (fully) counted. Index of lost. */
enum offcpu_lost {
	OFFCPU_LOST_THREADS_FULL = 0,       /* a thread had no room in threads */
	OFFCPU_LOST_KERNEL_STACKS_FULL = 1, /* stacks map full: a wait without its kernel stack */
	OFFCPU_LOST_USER_STACKS_FULL = 2,
	OFFCPU_LOST_KERNEL_STACK_FAULT = 3,
	OFFCPU_LOST_USER_STACK_FAULT = 4,
	OFFCPU_LOST_WAITS_FULL = 5,         /* waits map full: a wait not aggregated */
	OFFCPU_LOST_PROCS_FULL = 6,         /* per-process histogram map full */
	OFFCPU_LOST_WAKER_STACK = 7,        /* a waker's stack not stored (full or fault) */
	OFFCPU_LOST_REASONS = 8,
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum offcpu_hook {
	OFFCPU_HOOK_SWITCH,
	OFFCPU_HOOK_WAKING,
	OFFCPU_HOOK_WAKEUP,
	OFFCPU_HOOK_WAKEUP_NEW,
};

#endif
