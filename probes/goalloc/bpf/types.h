/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between goalloc.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_GOALLOC_TYPES_H
#define PERFSCOPE_GOALLOC_TYPES_H

/* PERF_MAX_STACK_DEPTH: the deepest stack bpf_get_stack records. */
enum { GOALLOC_MAX_DEPTH = 127 };

/* One user stack, leaf first, zero after the last frame. */
struct go_stack {
	__u64 ips[GOALLOC_MAX_DEPTH];
};

/* One aggregation bucket of allocation samples: the allocating stack (a
 * go_stacks key) and the object size the runtime recorded. Samples of one
 * stack with different sizes are kept apart because each size has its own
 * sampling probability. */
struct alloc_key {
	__u64 stack;
	__u64 size;
};

/* What the runtime's sync.Pool methods did with one pool. */
struct pool_counts {
	__u64 gets;
	__u64 puts;
	/* news: calls of the pool's New function from Get, one per miss of
	 * a pool that has a New function. */
	__u64 news;
};

/* Per-CPU counters (index of the counters map). */
enum goalloc_counter {
	GOALLOC_SAMPLES = 0,      /* mProf_Malloc calls seen (every sample) */
	GOALLOC_SAMPLE_BYTES = 1, /* their sizes summed, unweighted */
	GOALLOC_GC_CYCLES = 2,    /* gcMarkTermination calls: completed GC cycles */
	GOALLOC_LOST_STACKS_FULL = 3,
	GOALLOC_LOST_STACK_FAULT = 4,
	GOALLOC_LOST_COUNTS_FULL = 5,
	GOALLOC_LOST_POOLS_FULL = 6,
	/* a New call whose Get was not seen (the probe attached between
	 * the two, or the goroutine table was full) */
	GOALLOC_LOST_POOL_NEW = 7,
	GOALLOC_COUNTERS = 8,
};

/* Slots of self_cost (selfcost.h), one per uprobe. */
enum goalloc_hook {
	GOALLOC_HOOK_MALLOC,
	GOALLOC_HOOK_GC,
	GOALLOC_HOOK_POOL_GET,
	GOALLOC_HOOK_POOL_PUT,
	GOALLOC_HOOK_POOL_NEW,
};

/* Where a Go function argument arrives under the amd64 register ABI
 * (ABIInternal, Go 1.17+): integer arguments in this order. */
enum go_arg_reg {
	GO_REG_RAX = 0,
	GO_REG_RBX = 1,
	GO_REG_RCX = 2,
	GO_REG_RDI = 3,
	GO_REG_RSI = 4,
	GO_REG_R8 = 5,
	GO_REG_R9 = 6,
	GO_REG_R10 = 7,
	GO_REG_R11 = 8,
};

#endif
