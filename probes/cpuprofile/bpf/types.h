/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between cpuprofile.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_CPUPROFILE_TYPES_H
#define PERFSCOPE_CPUPROFILE_TYPES_H

/* PERF_MAX_STACK_DEPTH: the deepest stack bpf_get_stackid records. */
enum { CPUPROFILE_MAX_DEPTH = 127 };
enum { CPUPROFILE_COMM_LEN = 16 };

/* Why a sample did not make it into sample_counts. Index of lost_samples. */
enum lost_reason {
	LOST_KERNEL_STACK_COLLISION = 0, /* -EEXIST: stack map bucket taken by another stack */
	LOST_KERNEL_STACK_FAULT = 1,     /* walk errors other than "no kernel half" */
	LOST_USER_STACK_COLLISION = 2,
	LOST_USER_STACK_FAULT = 3,       /* -EFAULT: e.g. user stack not resident */
	LOST_COUNTS_FULL = 4,            /* sample_counts hash full */
	LOST_REASONS = 5,
};

/* One aggregation bucket: a thread on a CPU with one kernel and one user
 * stack. Stack ids are stack_traces keys; -1 means "not collected" (the
 * other half was asked for with --kernel-only/--user-only, or a kernel
 * thread has no user stack). All fields are 4-byte, so there is no padding
 * for the hash to compare. */
struct sample_key {
	__u32 pid;  /* thread id (kernel pid) */
	__u32 tgid; /* process id */
	__u32 cpu;
	__s32 kernel_stack_id;
	__s32 user_stack_id;
	char comm[CPUPROFILE_COMM_LEN];
};

/* Slots of self_cost (selfcost.h): the one program. */
enum cpuprofile_hook {
	CPUPROFILE_HOOK_CPU_CLOCK,
};

#endif
