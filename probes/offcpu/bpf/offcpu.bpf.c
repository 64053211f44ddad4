// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * offcpu: where threads wait. From sched:sched_switch, sched:sched_waking,
 * sched:sched_wakeup and sched:sched_wakeup_new, aggregated in the kernel:
 *
 *  - off-CPU time by thread, kernel + user stack at the switch-out, the
 *    state the thread left the CPU in, and who woke it (the waker's thread
 *    and stacks, as bcc's offwaketime), for waits of at least min_block_ns;
 *  - per thread: time on CPU, runnable (waiting for a CPU after a wakeup or
 *    a preemption) and blocked by state, for every wait however short;
 *  - run-queue latency (wakeup -> run, preempted -> run) as log2
 *    histograms per CPU and per process, as bcc's runqlat.
 *
 * Stacks are taken at the switch-out, in the switching thread's own
 * context: a user stack can only be walked for the current task
 * (bpf_get_task_stack refuses a user stack of another with -EOPNOTSUPP),
 * and sched_switch runs in the task leaving the CPU. They are stored as
 * cpuprofile stores them, keyed by a 64-bit hash of their frames in a
 * hash map (stackhash.h).
 *
 * The waker is recorded at sched_waking, which runs in the waker's
 * context. sched_wakeup does not always: a wakeup queued to another CPU's
 * wake list (TTWU_QUEUE) fires it from that CPU's interrupt, in whatever
 * task was running there. sched_wakeup (and sched_wakeup_new) start the
 * run-queue clock, as runqlat does.
 *
 * In-flight times belong to an epoch (config[0]): user space starts a new
 * one for each window and when the overhead budget attaches the hooks
 * again after a gap, so a wait is never timed across events the probe
 * did not see. A thread's first event in an epoch closes the time before
 * it from the window's start: on CPU if it is a switch-out, off CPU
 * (state unknown) if it is a switch-in or a wakeup.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"
#include "selfcost.h"
#include "stackhash.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum offcpu_hook);

/* Knobs set by the loader before load. */
const volatile __u32 target_tgid = 0;    /* 0: every process */
const volatile __u64 min_block_ns = 0;   /* shorter waits are only counted per thread */
const volatile bool collect_kernel = true;
const volatile bool collect_user = true;
const volatile bool collect_wakers = true;
const volatile __u32 stack_every = 1;    /* take stacks at 1 in N switch-outs */

/* max_entries are resized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

/* Waker stacks by waker thread, woken thread and the waker's user
 * registers (see waker_stacks); least recently used go first. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct waker_cache_key);
	__type(value, struct waker_cache_val);
} waker_cache SEC(".maps");

/* Where a waker_cache key is built: too big for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct waker_cache_key);
} waker_key_scratch SEC(".maps");

/* A histogram of zeroes, never written: what a process's starts from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hist_zero SEC(".maps");

/* A thread_state of zeroes, never written: what a new thread starts from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct stack_frames);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct wait_key);
	__type(value, struct wait_stat);
} waits SEC(".maps");

/* Per CPU: the CPU the thread got to run on. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_RUNQ_KINDS);
	__type(key, enum offcpu_runq_kind);
	__type(value, struct hist);
} runq_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct proc_key);
	__type(value, struct hist);
} runq_proc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_config);
} config SEC(".maps");

/* Where bpf_get_stack writes a stack before it is hashed: too big for the
 * BPF stack. Slot 0 for sched_switch, 1 for sched_waking: a waking
 * program may be interrupted by one on the same CPU only where interrupts
 * are on, and sched_switch runs with them off. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct stack_frames);
} stack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_LOST_REASONS);
	__type(key, enum offcpu_lost);
	__type(value, __u64);
} lost SEC(".maps");

/* Only these members are read. The flavour suffix keeps the declaration
 * apart from any task_struct another header may add; CO-RE ignores it. */
struct task_struct___offcpu {
	int pid;
	int tgid;
	unsigned int flags;
} __attribute__((preserve_access_index));

/* The kernel's own type, for bpf_get_task_stack's argument. */
struct task_struct;

enum { PF_KTHREAD = 0x00200000 };

/* Task states (include/linux/sched.h), as sched_switch's raw prev_state
 * carries them. */
enum {
	TASK_INTERRUPTIBLE = 0x1,
	TASK_UNINTERRUPTIBLE = 0x2,
	TASK_STOPPED_ = 0x4,
	TASK_TRACED_ = 0x8,
	EXIT_DEAD_ = 0x10,
	EXIT_ZOMBIE_ = 0x20,
	TASK_PARKED_ = 0x40,
	TASK_DEAD_ = 0x80,
	TASK_NOLOAD_ = 0x400,
	TASK_RTLOCK_WAIT_ = 0x1000,
};

/* The classic tracepoint's prev_state is the report form
 * (__trace_sched_switch_state): one bit per state letter, 0x80 for I and
 * TASK_REPORT_MAX (0x100 since 4.14) for a preemption. */
enum {
	REPORT_IDLE = 0x80,
	REPORT_PREEMPTED = 0x100,
};

static __always_inline void count_lost(enum offcpu_lost reason)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &reason);
	if (n)
		(*n)++;
}

static __always_inline enum offcpu_state state_of_raw(bool preempt, unsigned int s)
{
	if (preempt || s == 0)
		return OFFCPU_RUNNABLE;
	if (s & (TASK_DEAD_ | EXIT_DEAD_ | EXIT_ZOMBIE_))
		return OFFCPU_DEAD;
	if ((s & (TASK_UNINTERRUPTIBLE | TASK_NOLOAD_)) == (TASK_UNINTERRUPTIBLE | TASK_NOLOAD_))
		return OFFCPU_IDLE;
	if (s & (TASK_UNINTERRUPTIBLE | TASK_RTLOCK_WAIT_))
		return OFFCPU_UNINTERRUPTIBLE;
	if (s & TASK_INTERRUPTIBLE)
		return OFFCPU_SLEEPING;
	return OFFCPU_OTHER;
}

static __always_inline enum offcpu_state state_of_report(long s)
{
	if (s == 0 || s >= REPORT_PREEMPTED)
		return OFFCPU_RUNNABLE;
	if (s & (EXIT_DEAD_ | EXIT_ZOMBIE_))
		return OFFCPU_DEAD;
	if (s & REPORT_IDLE)
		return OFFCPU_IDLE;
	if (s & TASK_UNINTERRUPTIBLE)
		return OFFCPU_UNINTERRUPTIBLE;
	if (s & TASK_INTERRUPTIBLE)
		return OFFCPU_SLEEPING;
	return OFFCPU_OTHER;
}

/* Records a stack in stacks under its hash, through scratch slot: the
 * current task's kernel (flags 0) or user (BPF_F_USER_STACK) stack, or
 * with task, the kernel stack of that task, which must not be running. */
static __always_inline enum store_result store_stack(void *ctx, struct task_struct *task, __u32 slot, __u64 flags, __u64 *hash)
{
	struct stack_frames *f = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!f)
		return FAULT;
	long n = task ? bpf_get_task_stack(task, f->ips, sizeof(f->ips), flags)
		      : bpf_get_stack(ctx, f->ips, sizeof(f->ips), flags);
	return store_frames(&stacks, f, f->ips, n, hash);
}

/* The user registers the current task entered the kernel with. Only
 * these are read; the flavour keeps the declaration apart from the
 * kernel's, CO-RE finds the offsets (x86-64: other architectures name
 * them differently, and the cache below is then off). */
struct pt_regs___offcpu {
	unsigned long bp;
	unsigned long di;
	unsigned long orig_ax;
	unsigned long sp;
	unsigned long ip;
} __attribute__((preserve_access_index));

/* The kernel stack pointer a task that is not running was switched out
 * at (x86-64's thread_struct). */
struct thread_struct___offcpu {
	unsigned long sp;
} __attribute__((preserve_access_index));

struct task_struct___offcpu_thread {
	struct thread_struct___offcpu thread;
} __attribute__((preserve_access_index));

/* user_regs_update reads what identifies the current task's user stack
 * without walking it, into key (a map value's: the BPF stack is too small
 * for a copy), and says whether it is what key held: the user instruction
 * pointer (the return address of the system call), stack and frame
 * pointers, and the two return addresses the frame pointer chain starts
 * with. A thread that leaves the CPU again from the same call (an event
 * loop's epoll_wait, a pool thread parked in getTask) has the same words
 * and the same stack; a call reached another way at the same depth
 * differs in a return address. Returns -1 when they cannot be read (key
 * is then cleared), 1 when they are key's, 0 when key changed. */
static __always_inline int set_word(__u64 *key, int i, __u64 v)
{
	int same = key[i] == v;
	key[i] = v;
	return same;
}

/* user_regs_update's bits: every word is what key held (the user stack
 * is the same), or the system call's (instruction and stack pointers,
 * call and first argument: the kernel side is the same, frame pointers
 * aside — a program built without them has anything in bp). */
enum { SITE_SAME_STACK = 1, SITE_SAME_CALL = 2 };

static __always_inline int user_regs_update(__u64 *key)
{
	struct pt_regs___offcpu *r = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!r || !bpf_core_field_exists(r->bp) || !bpf_core_field_exists(r->orig_ax)) {
		for (int i = 0; i < OFFCPU_USER_KEY; i++)
			key[i] = 0;
		return -1;
	}
	__u64 bp = BPF_CORE_READ(r, bp);
	int call = set_word(key, 0, BPF_CORE_READ(r, ip));
	call &= set_word(key, 1, BPF_CORE_READ(r, sp));
	call &= set_word(key, 5, BPF_CORE_READ(r, orig_ax));
	call &= set_word(key, 6, BPF_CORE_READ(r, di));
	int stack = set_word(key, 2, bp);
	__u64 frame[2] = {};
	__u64 ret1 = 0, ret2 = 0;
	if (bp && bpf_probe_read_user(frame, sizeof(frame), (void *)bp) == 0) {
		ret1 = frame[1];
		if (frame[0] && bpf_probe_read_user(frame, sizeof(frame), (void *)frame[0]) == 0)
			ret2 = frame[1];
	}
	stack &= set_word(key, 3, ret1);
	stack &= set_word(key, 4, ret2);
	return (call && stack ? SITE_SAME_STACK : 0) | (call ? SITE_SAME_CALL : 0);
}

/* Counts a failed kernel stack of a wait (not a waker's). */
static __always_inline __u8 kernel_half(enum store_result r, bool waker)
{
	switch (r) {
	case STORED:
		return waker ? OFFCPU_WAKER_KERNEL : OFFCPU_HALF_KERNEL;
	case EMPTY:
		break;
	case FULL:
		count_lost(waker ? OFFCPU_LOST_WAKER_STACK : OFFCPU_LOST_KERNEL_STACKS_FULL);
		break;
	case FAULT:
		count_lost(waker ? OFFCPU_LOST_WAKER_STACK : OFFCPU_LOST_KERNEL_STACK_FAULT);
		break;
	}
	return 0;
}

/* user_stack_cached sets *user to the stack the thread's last walk
 * found when it leaves the CPU with the same user registers (see
 * user_regs_key), and otherwise notes the registers for the walk that
 * follows. Walking the user stack (a read of user memory per frame) and
 * hashing it was most of what a switch-out cost the leaving thread, and
 * a server thread leaves the CPU from a handful of places. */
static __always_inline bool user_stack_cached(struct thread_state *t, __u64 *user)
{
	if (t->site > 0 && (t->site & SITE_SAME_STACK) && t->walked_user_stack) {
		*user = t->walked_user_stack;
		return true;
	}
	t->walked_user_stack = 0;
	return false;
}

/* Takes the current task's stacks into *kernel (unless kernel_too is
 * false: taken later, see switch_in) and *user; returns the OFFCPU_HALF_*
 * (or, for a waker, OFFCPU_WAKER_*) bits of those taken. */
static __always_inline __u8 take_stacks(void *ctx, struct thread_state *t, __u32 slot, __u64 *kernel, __u64 *user, bool waker, bool kernel_too)
{
	__u8 halves = 0;
	__u8 u = waker ? OFFCPU_WAKER_USER : OFFCPU_HALF_USER;
	if (collect_kernel && kernel_too)
		halves |= kernel_half(store_stack(ctx, 0, slot, 0, kernel), waker);
	if (collect_user) {
		struct task_struct___offcpu *task = (void *)bpf_get_current_task();
		__u32 pid = (__u32)bpf_get_current_pid_tgid();
		/* Kernel threads and the idle task have no user stack. */
		if (pid != 0 && !(BPF_CORE_READ(task, flags) & PF_KTHREAD)) {
			if (t && user_stack_cached(t, user)) {
				halves |= u;
				return halves;
			}
			switch (store_stack(ctx, 0, slot, BPF_F_USER_STACK, user)) {
			case STORED:
				halves |= u;
				if (t) {
					/* t->walked_regs was set by user_stack_cached. */
					t->walked_user_stack = *user;
				}
				break;
			case FULL:
				count_lost(waker ? OFFCPU_LOST_WAKER_STACK : OFFCPU_LOST_USER_STACKS_FULL);
				break;
			case EMPTY:
			case FAULT:
				count_lost(waker ? OFFCPU_LOST_WAKER_STACK : OFFCPU_LOST_USER_STACK_FAULT);
				break;
			}
		}
	}
	return halves;
}

static __always_inline struct offcpu_config *config_now(void)
{
	__u32 zero = 0;
	struct offcpu_config *c = bpf_map_lookup_elem(&config, &zero);
	if (!c || c->epoch == 0)
		return 0;
	return c;
}

/* The time from the window's start to now, for a thread first seen now. */
static __always_inline __u64 since_window(struct offcpu_config *c, __u64 now)
{
	__u64 start = c->window_start_ns;
	return start && now > start ? now - start : 0;
}

/* The thread's entry, created when create (tgid known); *fresh says it is
 * the thread's first event in this epoch: its in-flight times are
 * cleared. A thread id reused by a new thread (the old one dead, or in
 * another process) starts over. */
static __always_inline struct thread_state *thread_of(__u32 pid, __u32 tgid, struct offcpu_config *c, bool create, bool *fresh)
{
	struct thread_state *t = bpf_map_lookup_elem(&threads, &pid);
	*fresh = false;
	if (t && tgid && (t->tgid != tgid || t->dead)) {
		__builtin_memset(t, 0, sizeof(*t));
		t->tgid = tgid;
		t->epoch = c->epoch;
		*fresh = true;
		return t;
	}
	if (!t) {
		if (!create || !tgid)
			return 0;
		/* A zeroed entry from a map: one on the BPF stack would leave
		 * too little of it for the stack walks. */
		__u32 zero_key = 0;
		struct thread_state *zero = bpf_map_lookup_elem(&thread_zero, &zero_key);
		if (!zero)
			return 0;
		bpf_map_update_elem(&threads, &pid, zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&threads, &pid);
		if (!t) {
			count_lost(OFFCPU_LOST_THREADS_FULL);
			return 0;
		}
		if (t->tgid == 0) {
			t->tgid = tgid;
			t->epoch = c->epoch;
		}
		*fresh = true;
		return t;
	}
	if (t->epoch != c->epoch) {
		t->off_ns = 0;
		t->on_ns = 0;
		t->runnable_ns = 0;
		t->waker.halves = 0;
		t->epoch = c->epoch;
		*fresh = true;
	}
	return t;
}

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	if (r >= OFFCPU_HIST_SLOTS)
		r = OFFCPU_HIST_SLOTS - 1;
	return r;
}

static __always_inline void count_runq(__u32 kind, __u64 ns, __u32 tgid)
{
	__u32 slot = log2_slot(ns);
	struct hist *h = bpf_map_lookup_elem(&runq_cpu, &kind);
	if (h && slot < OFFCPU_HIST_SLOTS) {
		h->slots[slot]++;
		h->count++;
		h->sum_ns += ns;
	}
	struct proc_key pk = { .tgid = tgid, .kind = kind };
	h = bpf_map_lookup_elem(&runq_proc, &pk);
	if (!h) {
		/* Zeroes from a map: 336 bytes on the BPF stack would leave too
		 * little of it for the stack walks. */
		__u32 zero_key = 0;
		struct hist *zero = bpf_map_lookup_elem(&hist_zero, &zero_key);
		if (!zero)
			return;
		bpf_map_update_elem(&runq_proc, &pk, zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&runq_proc, &pk);
		if (!h) {
			count_lost(OFFCPU_LOST_PROCS_FULL);
			return;
		}
	}
	if (slot < OFFCPU_HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, ns);
}

static __always_inline void aggregate(struct thread_state *t, __u32 pid, __u64 off, __u64 runq)
{
	struct wait_key k;
	__builtin_memset(&k, 0, sizeof(k));
	k.kernel_stack = t->kernel_stack;
	k.user_stack = t->user_stack;
	k.pid = pid;
	k.tgid = t->tgid;
	k.state = t->state;
	k.halves = t->halves;
	if (t->waker.halves & OFFCPU_WAKER_KNOWN) {
		k.halves |= t->waker.halves;
		k.waker_kernel_stack = t->waker.kernel_stack;
		k.waker_user_stack = t->waker.user_stack;
		k.waker_pid = t->waker.pid;
		k.waker_tgid = t->waker.tgid;
		__builtin_memcpy(k.waker_comm, t->waker.comm, sizeof(k.waker_comm));
	}
	struct wait_stat *s = bpf_map_lookup_elem(&waits, &k);
	if (!s) {
		struct wait_stat zero = {};
		bpf_map_update_elem(&waits, &k, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&waits, &k);
		if (!s) {
			count_lost(OFFCPU_LOST_WAITS_FULL);
			return;
		}
	}
	/* One thread's waits end on one CPU at a time: no other writer. */
	s->count++;
	s->total_ns += off;
	s->runq_ns += runq;
	if (off > s->max_ns)
		s->max_ns = off;
}

/* arr[i] += v for an index below OFFCPU_STATES, written so that the
 * verifier sees the bound whatever the compiler does with i. */
static __always_inline void add_at(__u64 *arr, __u32 i, __u64 v)
{
	switch (i) {
	case 0: arr[0] += v; break;
	case 1: arr[1] += v; break;
	case 2: arr[2] += v; break;
	case 3: arr[3] += v; break;
	case 4: arr[4] += v; break;
	}
}

/* switch_out: the current task leaves the CPU. With defer_kernel its
 * kernel stack is left for switch_in, which takes it from the sleeping
 * task only for waits long enough to aggregate: unwinding the kernel
 * stack was most of a switch's cost, and most waits are shorter. */
static __always_inline void switch_out(void *ctx, struct offcpu_config *c, __u64 now, enum offcpu_state state, bool defer_kernel)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = (__u32)id, tgid = id >> 32;
	bool fresh;

	if (pid == 0 || (target_tgid && tgid != target_tgid))
		return;
	struct thread_state *t = thread_of(pid, tgid, c, true, &fresh);
	if (!t)
		return;
	if (fresh)
		t->totals.on_ns += since_window(c, now);
	else if (t->on_ns && now > t->on_ns)
		t->totals.on_ns += now - t->on_ns;
	t->on_ns = 0;
	t->waker.halves = 0;
	if (state == OFFCPU_DEAD) {
		t->dead = 1;
		t->off_ns = 0;
		t->runnable_ns = 0;
		return;
	}
	add_at(t->totals.switches, state, 1);
	t->off_ns = now;
	t->state = state;
	t->runnable_ns = state == OFFCPU_RUNNABLE ? now : 0;
	bpf_get_current_comm(&t->comm, sizeof(t->comm));
	t->halves = 0;
	t->sampled = stack_every <= 1 || bpf_get_prandom_u32() % stack_every == 0;
	/* Where the thread waits, to reuse the stacks walked the last time it
	 * waited there (user_stack_cached, switch_in). */
	t->site = t->sampled && pid != 0 ? user_regs_update(t->walked_regs) : -1;
	if (t->sampled)
		t->halves = take_stacks(ctx, t, 0, &t->kernel_stack, &t->user_stack, false, !defer_kernel);
}

/* deferred_kernel_stack takes the kernel stack of next, switched out
 * since, or gives it the one its last walk found when it waited from the
 * same user call (t->site) and was switched out at the same kernel stack
 * pointer: the same system call on the same fd or futex blocking the same
 * way. Unwinding a sleeping task's kernel stack was most of a switch-in's
 * cost. */
static __always_inline __u8 deferred_kernel_stack(struct thread_state *t, struct task_struct *next)
{
	struct task_struct___offcpu_thread *n = (void *)next;
	__u64 ksp = 0;
	if (bpf_core_field_exists(n->thread.sp))
		ksp = BPF_CORE_READ(n, thread.sp);
	if (ksp && t->site > 0 && (t->site & SITE_SAME_CALL) && t->walked_kernel_stack && t->walked_kernel_sp == ksp) {
		t->kernel_stack = t->walked_kernel_stack;
		return OFFCPU_HALF_KERNEL;
	}
	__u8 half = kernel_half(store_stack(0, next, 0, 0, &t->kernel_stack), false);
	t->walked_kernel_stack = half && ksp && t->site >= 0 ? t->kernel_stack : 0;
	t->walked_kernel_sp = ksp;
	return half;
}

/* switch_in: thread pid (of process tgid, 0 when unknown) gets the CPU.
 * next is its task when the kernel stack was deferred (see switch_out). */
static __always_inline void switch_in(struct offcpu_config *c, __u64 now, __u32 pid, __u32 tgid, struct task_struct *next)
{
	bool fresh;

	if (pid == 0)
		return;
	if (target_tgid && tgid && tgid != target_tgid)
		return;
	struct thread_state *t = thread_of(pid, tgid, c, true, &fresh);
	if (!t)
		return;
	if (fresh) {
		/* Off CPU since before the window, in a state not seen. */
		t->totals.before_ns += since_window(c, now);
	} else if (t->off_ns && now >= t->off_ns) {
		__u64 off = now - t->off_ns;
		__u64 runq = 0;
		__u32 kind = t->state == OFFCPU_RUNNABLE ? OFFCPU_RUNQ_PREEMPTED : OFFCPU_RUNQ_WAKEUP;
		if (t->runnable_ns && now >= t->runnable_ns) {
			runq = now - t->runnable_ns;
			if (runq > off)
				runq = off;
			add_at(t->totals.runq_ns, kind, runq);
			add_at(t->totals.runq_count, kind, 1);
			count_runq(kind, runq, t->tgid);
		}
		if (t->state != OFFCPU_RUNNABLE)
			add_at(t->totals.blocked_ns, t->state, off - runq);
		t->totals.waits++;
		if (off < min_block_ns) {
			t->totals.short_waits++;
			t->totals.short_ns += off;
		} else if (t->sampled) {
			if (next && collect_kernel)
				t->halves |= deferred_kernel_stack(t, next);
			aggregate(t, pid, off, runq);
		}
	} else if (t->runnable_ns && now >= t->runnable_ns) {
		/* Woken (or created) in this epoch before any switch-out. */
		__u64 runq = now - t->runnable_ns;
		t->totals.runq_ns[OFFCPU_RUNQ_WAKEUP] += runq;
		t->totals.runq_count[OFFCPU_RUNQ_WAKEUP]++;
		count_runq(OFFCPU_RUNQ_WAKEUP, runq, t->tgid);
	}
	t->off_ns = 0;
	t->runnable_ns = 0;
	t->waker.halves = 0;
	t->on_ns = now;
}

/* next: the incoming task where the program may pass it to
 * bpf_get_task_stack (tp_btf); 0 takes kernel stacks at the switch-out. */
static __always_inline int on_switch(void *ctx, enum offcpu_state prev_state, __u32 next_pid, __u32 next_tgid, struct task_struct *next)
{
	struct offcpu_config *c = config_now();
	if (!c)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	switch_out(ctx, c, now, prev_state, next != 0);
	switch_in(c, now, next_pid, next_tgid, next);
	return 0;
}

/* waker_stacks takes the waker's (the current task's) stacks into w, or
 * gives it those walked at this thread's last wakeup when the same waker
 * thread wakes it again from the same user call (user_regs_key): a
 * server's request path wakes the same thread the same way request after
 * request, and walking the waker's kernel stack (the network stack's
 * softirq under a send, ~40 frames) was most of what a wakeup cost.
 * Kernel threads and interrupts of the idle task are walked every time. */
static __always_inline __u8 waker_stacks(void *ctx, __u32 wakee, struct waker *w)
{
	struct task_struct___offcpu *task = (void *)bpf_get_current_task();
	__u32 zero = 0;
	struct waker_cache_key *k = bpf_map_lookup_elem(&waker_key_scratch, &zero);
	/* The whole key is the cache's: every word counts. */
	bool keyed = k && w->pid != 0 && !(BPF_CORE_READ(task, flags) & PF_KTHREAD) && user_regs_update(k->regs) >= 0;
	if (keyed) {
		k->waker_pid = w->pid;
		k->wakee_pid = wakee;
		struct waker_cache_val *v = bpf_map_lookup_elem(&waker_cache, k);
		if (v) {
			w->kernel_stack = v->kernel_stack;
			w->user_stack = v->user_stack;
			return v->halves;
		}
	}
	__u8 halves = take_stacks(ctx, 0, 1, &w->kernel_stack, &w->user_stack, true, true);
	if (keyed && halves) {
		struct waker_cache_val v = { .kernel_stack = w->kernel_stack, .user_stack = w->user_stack, .halves = halves };
		bpf_map_update_elem(&waker_cache, k, &v, BPF_ANY);
	}
	return halves;
}

/* sched_waking, in the waker's context: note who wakes a thread that has
 * been blocked at least min_block_ns (a shorter wait's waker would not be
 * reported), with the waker's stacks. */
static __always_inline int on_waking(void *ctx, __u32 pid)
{
	struct offcpu_config *c = config_now();
	if (!c || pid == 0)
		return 0;
	struct thread_state *t = bpf_map_lookup_elem(&threads, &pid);
	if (!t || t->epoch != c->epoch || !t->off_ns || t->state == OFFCPU_RUNNABLE)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < t->off_ns || now - t->off_ns < min_block_ns)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	/* Written in place: a copy on the BPF stack leaves too little of it
	 * for the stack walks. */
	struct waker *w = &t->waker;
	w->kernel_stack = 0;
	w->user_stack = 0;
	w->pid = (__u32)id;
	w->tgid = id >> 32;
	w->halves = OFFCPU_WAKER_KNOWN;
	bpf_get_current_comm(&w->comm, sizeof(w->comm));
	if (collect_wakers && t->sampled)
		w->halves |= waker_stacks(ctx, pid, w);
	return 0;
}

/* sched_wakeup and sched_wakeup_new: the thread is on a run queue. */
static __always_inline int on_wakeup(__u32 pid, __u32 tgid, bool created)
{
	struct offcpu_config *c = config_now();
	bool fresh;
	if (!c || pid == 0)
		return 0;
	if (target_tgid && tgid && tgid != target_tgid)
		return 0;
	struct thread_state *t = thread_of(pid, tgid, c, true, &fresh);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (fresh) {
		if (!created)
			t->totals.before_ns += since_window(c, now);
		t->runnable_ns = now;
		return 0;
	}
	/* A wakeup of a thread on CPU (it had not switched out yet) or
	 * already runnable changes nothing. */
	if (t->off_ns && !t->runnable_ns)
		t->runnable_ns = now;
	return 0;
}

static __always_inline __u32 task_pid(struct task_struct___offcpu *p) { return BPF_CORE_READ(p, pid); }
static __always_inline __u32 task_tgid(struct task_struct___offcpu *p) { return BPF_CORE_READ(p, tgid); }

/* tp_btf (5.18+: prev_state is the fourth argument). */
SEC("tp_btf/sched_switch")
int BPF_PROG(btf_sched_switch, bool preempt, struct task_struct___offcpu *prev, struct task_struct___offcpu *next, unsigned int prev_state)
{
	return SELF_COSTED(OFFCPU_HOOK_SWITCH, on_switch(ctx, state_of_raw(preempt, prev_state), task_pid(next), task_tgid(next), (void *)next));
}
SEC("tp_btf/sched_waking")
int BPF_PROG(btf_sched_waking, struct task_struct___offcpu *p) { return SELF_COSTED(OFFCPU_HOOK_WAKING, on_waking(ctx, task_pid(p))); }
SEC("tp_btf/sched_wakeup")
int BPF_PROG(btf_sched_wakeup, struct task_struct___offcpu *p) { return SELF_COSTED(OFFCPU_HOOK_WAKEUP, on_wakeup(task_pid(p), task_tgid(p), false)); }
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(btf_sched_wakeup_new, struct task_struct___offcpu *p) { return SELF_COSTED(OFFCPU_HOOK_WAKEUP_NEW, on_wakeup(task_pid(p), task_tgid(p), true)); }

/* raw_tp: the same arguments as u64s. Before 5.18 sched_switch has three
 * and attaching this program (which reads a fourth) fails, so the loader
 * falls back to the classic tracepoint. */
SEC("raw_tp/sched_switch")
int raw_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___offcpu *next = (void *)ctx->args[2];
	return SELF_COSTED(OFFCPU_HOOK_SWITCH, on_switch(ctx, state_of_raw((bool)ctx->args[0], (unsigned int)ctx->args[3]), task_pid(next), task_tgid(next), 0));
}
SEC("raw_tp/sched_waking")
int raw_sched_waking(struct bpf_raw_tracepoint_args *ctx)
{
	return SELF_COSTED(OFFCPU_HOOK_WAKING, on_waking(ctx, task_pid((void *)ctx->args[0])));
}
SEC("raw_tp/sched_wakeup")
int raw_sched_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___offcpu *p = (void *)ctx->args[0];
	return SELF_COSTED(OFFCPU_HOOK_WAKEUP, on_wakeup(task_pid(p), task_tgid(p), false));
}
SEC("raw_tp/sched_wakeup_new")
int raw_sched_wakeup_new(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___offcpu *p = (void *)ctx->args[0];
	return SELF_COSTED(OFFCPU_HOOK_WAKEUP_NEW, on_wakeup(task_pid(p), task_tgid(p), true));
}

/* Classic tracepoints carry thread ids, not tasks: a thread whose first
 * event is its switch-in or a wakeup (no process id to filter or key by)
 * is only counted from its first switch-out. */
struct trace_event_raw_sched_switch___offcpu {
	struct trace_entry ent;
	char prev_comm[16];
	int prev_pid;
	int prev_prio;
	long prev_state;
	char next_comm[16];
	int next_pid;
	int next_prio;
} __attribute__((preserve_access_index));

struct trace_event_raw_sched_wakeup_template___offcpu {
	struct trace_entry ent;
	char comm[16];
	int pid;
	int prio;
} __attribute__((preserve_access_index));

SEC("tracepoint/sched/sched_switch")
int tp_sched_switch(struct trace_event_raw_sched_switch___offcpu *ctx)
{
	return SELF_COSTED(OFFCPU_HOOK_SWITCH, on_switch(ctx, state_of_report(ctx->prev_state), ctx->next_pid, 0, 0));
}
SEC("tracepoint/sched/sched_waking")
int tp_sched_waking(struct trace_event_raw_sched_wakeup_template___offcpu *ctx)
{
	return SELF_COSTED(OFFCPU_HOOK_WAKING, on_waking(ctx, ctx->pid));
}
SEC("tracepoint/sched/sched_wakeup")
int tp_sched_wakeup(struct trace_event_raw_sched_wakeup_template___offcpu *ctx)
{
	return SELF_COSTED(OFFCPU_HOOK_WAKEUP, on_wakeup(ctx->pid, 0, false));
}
SEC("tracepoint/sched/sched_wakeup_new")
int tp_sched_wakeup_new(struct trace_event_raw_sched_wakeup_template___offcpu *ctx)
{
	return SELF_COSTED(OFFCPU_HOOK_WAKEUP_NEW, on_wakeup(ctx->pid, 0, true));
}
