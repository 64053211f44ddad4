// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * cpuprofile: on-CPU stack sampling. User space opens a software cpu-clock
 * perf event on every online CPU at a fixed frequency and attaches
 * on_cpu_clock to each; every tick records the interrupted thread's kernel
 * and user stacks in a hash keyed by a 64-bit hash of their frames and
 * counts the (thread, CPU, stacks) tuple in a second hash, so only distinct
 * stacks ever cross to user space.
 *
 * Not a BPF_MAP_TYPE_STACK_TRACE (see stackhash.h): on a busy machine at
 * 999 Hz a fifth of the samples were lost to its bucket collisions.
 *
 * The stack map and the count hash come in two generations; the program
 * writes the one generation[0] names. A one-shot run never switches (its
 * second generation has one entry). A continuous run (perfscope serve)
 * switches every window and then reads and empties the generation it left:
 * see the in_flight protocol below and Profiler.Drain.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "types.h"
#include "selfcost.h"
#include "stackhash.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum cpuprofile_hook);

/* Knobs set by the loader before load. */
const volatile __u32 target_tgid = 0;   /* 0: every process */
const volatile bool collect_kernel = true;
const volatile bool collect_user = true;
const volatile bool include_idle = false;
/* Keep the idle task's samples too, so that user space can tell the idle
 * loop from interrupts and softirqs run on an idle CPU (see
 * keep_idle_interrupts in cpuprofile.go). */
const volatile bool keep_idle_interrupts = false;

/* max_entries of the four maps are resized by the loader. Generation 0.
 * stack_traces: frame hash (stack_hash) -> the frames, leaf first, zero
 * after the last. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct stack_frames);
} stack_traces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 40960);
	__type(key, struct sample_key);
	__type(value, __u64);
} sample_counts SEC(".maps");

/* Generation 1: stack hashes in its counts' keys are its own stack map's. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct stack_frames);
} stack_traces_1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 40960);
	__type(key, struct sample_key);
	__type(value, __u64);
} sample_counts_1 SEC(".maps");

/* [0]: the generation samples go to (0 or 1), written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} generation SEC(".maps");

/* [0]: programs running now. Each counts itself in before it reads the
 * generation and out when it no longer writes. User space switches the
 * generation, then waits until it sees this at zero: every program that
 * counted itself in before then has finished, and every one counting in
 * after reads the new generation (the add is a full barrier), so nothing
 * writes to the old generation while user space reads and empties it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} in_flight SEC(".maps");

/* The processes (tgids) sampled since user space last emptied this map
 * (Profiler.PIDs), so that it can read a short-lived process's mappings
 * before the process exits without reading every key of the count hash to
 * learn which processes those keys name. Not part of the generations: it
 * only says "read this process's maps soon". When full, a new process is
 * not noted but its samples are still counted: its mappings are then read
 * at symbolization, as they would be without the prefetch. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} sampled_tgids SEC(".maps");

/* Where bpf_get_stack writes one half of a sample before it is hashed: too
 * big for the BPF stack. Per CPU, and the program cannot nest on its CPU
 * (a perf event's program is skipped while another runs there). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_frames);
} stack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST_REASONS);
	__type(key, enum lost_reason);
	__type(value, __u64);
} lost_samples SEC(".maps");

/* Only task_struct->flags is read. The "___cpuprofile" flavour suffix keeps
 * this declaration from clashing with a task_struct another probe may add to
 * kernel.h; CO-RE ignores the suffix when matching the kernel's BTF. */
struct task_struct___cpuprofile {
	unsigned int flags;
} __attribute__((preserve_access_index));

enum { PF_KTHREAD = 0x00200000 };

static __always_inline void count_lost(enum lost_reason reason)
{
	__u64 *n = bpf_map_lookup_elem(&lost_samples, &reason);
	if (n)
		(*n)++;
}

/* store_stack records one half of the current sample (flags 0: kernel,
 * BPF_F_USER_STACK: user) in stack_traces under its hash. */
static __always_inline enum store_result store_stack(void *ctx, void *stack_traces, __u64 flags, __u64 *hash)
{
	__u32 zero = 0;
	struct stack_frames *f = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!f)
		return FAULT;
	/* Bytes written; the rest of the buffer is zeroed. */
	long n = bpf_get_stack(ctx, f->ips, sizeof(f->ips), flags);
	return store_frames(stack_traces, f, f->ips, n, hash);
}

static __always_inline int record(void *ctx, void *stack_traces, void *sample_counts)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, pid = (__u32)id;

	if (target_tgid && tgid != target_tgid)
		return 0;
	/* On a real NIC most NET_RX softirqs run from irq_exit on a CPU that
	 * was idle, i.e. in the idle task's context: dropping pid 0 would drop
	 * them. The preempt count that says "serving softirq" is a per-CPU
	 * variable on x86 that a loader without typed ksyms cannot reach, so
	 * the idle task's samples go to user space, which classifies them by
	 * their kernel stack (few distinct stacks: cheap). */
	if (pid == 0 && !include_idle && !keep_idle_interrupts)
		return 0;

	struct sample_key key;
	__builtin_memset(&key, 0, sizeof(key));
	key.pid = pid;
	key.tgid = tgid;
	key.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(&key.comm, sizeof(key.comm));

	if (collect_kernel) {
		switch (store_stack(ctx, stack_traces, 0, &key.kernel_stack)) {
		case STORED:
			key.halves |= HALF_KERNEL;
			break;
		case EMPTY: /* a sample taken in user mode */
			break;
		case FULL:
			count_lost(LOST_KERNEL_STACKS_FULL);
			return 0;
		case FAULT:
			count_lost(LOST_KERNEL_STACK_FAULT);
			return 0;
		}
	}
	if (collect_user) {
		/* Kernel threads and the idle task have no user stack: that is
		 * not a lost sample, just an empty half. */
		struct task_struct___cpuprofile *task = (void *)bpf_get_current_task();
		bool kthread = pid == 0 || (BPF_CORE_READ(task, flags) & PF_KTHREAD);
		if (!kthread) {
			switch (store_stack(ctx, stack_traces, BPF_F_USER_STACK, &key.user_stack)) {
			case STORED:
				key.halves |= HALF_USER;
				break;
			case FULL:
				count_lost(LOST_USER_STACKS_FULL);
				return 0;
			case EMPTY: /* a user thread without a user frame: a fault */
			case FAULT:
				count_lost(LOST_USER_STACK_FAULT);
				return 0;
			}
		} else if (!collect_kernel) {
			return 0; /* --user-only: nothing of a kernel thread to show */
		}
	}

	/* Noted once the sample can no longer be lost to a stack fault, so
	 * PIDs names only processes with counted samples. The lockless lookup
	 * first: a process already noted (nearly every sample) costs no bucket
	 * lock. tgid 0 is the idle task, which has no mappings. */
	if (tgid && !bpf_map_lookup_elem(&sampled_tgids, &tgid)) {
		__u8 yes = 1;
		bpf_map_update_elem(&sampled_tgids, &tgid, &yes, BPF_NOEXIST);
	}

	__u64 *count = bpf_map_lookup_elem(sample_counts, &key);
	if (count) {
		__sync_fetch_and_add(count, 1);
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(sample_counts, &key, &one, BPF_NOEXIST) == 0)
		return 0;
	/* Another CPU may have inserted the same key in between. */
	count = bpf_map_lookup_elem(sample_counts, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		count_lost(LOST_COUNTS_FULL);
	return 0;
}

static __always_inline int sample(void *ctx)
{
	__u32 zero = 0;
	__u64 *busy = bpf_map_lookup_elem(&in_flight, &zero);
	__u32 *gen = bpf_map_lookup_elem(&generation, &zero);
	if (!busy || !gen)
		return 0;
	/* The fetching form of the add is the fully ordered one (the
	 * generation is read after it): using its result keeps clang from
	 * emitting the plain, unordered add. */
	__u64 running = __sync_fetch_and_add(busy, 1);
	asm volatile("" : : "r"(running));
	if (*(volatile __u32 *)gen)
		record(ctx, &stack_traces_1, &sample_counts_1);
	else
		record(ctx, &stack_traces, &sample_counts);
	__sync_fetch_and_add(busy, -1);
	return 0;
}

SEC("perf_event")
int on_cpu_clock(void *ctx) { return SELF_COSTED(CPUPROFILE_HOOK_CPU_CLOCK, sample(ctx)); }
