/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between cpuprofile.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_CPUPROFILE_TYPES_H
#define PERFSCOPE_CPUPROFILE_TYPES_H

/* PERF_MAX_STACK_DEPTH: the deepest stack bpf_get_stack records. */
enum { CPUPROFILE_MAX_DEPTH = 127 };

/* One half of a sample, leaf first, zero after the last frame. */
struct stack_frames {
	__u64 ips[CPUPROFILE_MAX_DEPTH];
};
enum { CPUPROFILE_COMM_LEN = 16 };

/* Why a sample did not make it into sample_counts. Index of lost_samples. */
enum lost_reason {
	LOST_KERNEL_STACKS_FULL = 0, /* stack map full: a new kernel stack had no room */
	LOST_KERNEL_STACK_FAULT = 1, /* walk errors other than "no kernel half" */
	LOST_USER_STACKS_FULL = 2,
	LOST_USER_STACK_FAULT = 3,   /* -EFAULT or no frame: e.g. user stack not resident */
	LOST_COUNTS_FULL = 4,            /* sample_counts hash full */
	LOST_REASONS = 5,
};

/* Which halves of a sample_key name a stack. */
enum stack_half {
	HALF_KERNEL = 1,
	HALF_USER = 2,
};

/* One aggregation bucket: a thread on a CPU with one kernel and one user
 * stack. The stacks are stack_traces keys, valid where halves says so (not
 * collected: the other half was asked for with --kernel-only/--user-only,
 * a kernel thread has no user stack, a user-mode sample no kernel one).
 * The layout has no padding for the hash to compare. */
struct sample_key {
	__u64 kernel_stack;
	__u64 user_stack;
	__u32 pid;    /* thread id (kernel pid) */
	__u32 tgid;   /* process id */
	__u32 cpu;
	__u32 halves; /* enum stack_half bits */
	char comm[CPUPROFILE_COMM_LEN];
};

/* Slots of self_cost (selfcost.h): the one program. */
enum cpuprofile_hook {
	CPUPROFILE_HOOK_CPU_CLOCK,
};

#endif
