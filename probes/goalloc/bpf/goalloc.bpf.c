// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * goalloc: what a running Go program allocates, from the sampling its own
 * runtime already does, and how its GC and sync.Pools behave — uprobes on
 * the program's binary, filtered by its tgid.
 *
 *   runtime.mProf_Malloc   every allocation the runtime samples for its
 *                          memory profile (one per MemProfileRate bytes on
 *                          average): its size and user stack, counted in
 *                          the kernel by (stack hash, size) as cpuprofile
 *                          counts its samples; user space weights them.
 *   runtime.gcMarkTermination  once per completed GC cycle (the runtime
 *                          increments its own cycle count there).
 *   sync.(*Pool).Get / Put per pool address; the call of the pool's New
 *                          function inside Get (a miss) is a uprobe at that
 *                          call instruction, joined to its Get through the
 *                          goroutine (the runtime keeps g in R14).
 *
 * Never a uretprobe: the Go runtime moves goroutine stacks, and a return
 * address the kernel rewrote on a stack that moved crashes the program.
 *
 * Arguments arrive in registers (the amd64 register ABI); which register
 * holds mProf_Malloc's size depends on the Go version, so the loader sets
 * size_reg. The context is the x86-64 user pt_regs, a fixed layout.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum goalloc_hook);

/* Set by the loader before load. */
const volatile __u32 target_tgid = 0;
const volatile enum go_arg_reg size_reg = GO_REG_RBX;
const volatile bool collect_stacks = true;

/* x86-64 struct pt_regs (arch/x86/include/uapi/asm/ptrace.h): what a
 * uprobe program's context is. Not CO-RE: the layout is user ABI. */
struct go_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* stack hash -> frames. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct go_stack);
} go_stacks SEC(".maps");

/* (stack, size) -> samples. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct alloc_key);
	__type(value, __u64);
} alloc_samples SEC(".maps");

/* pool address -> its counts on this CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct pool_counts);
} pools SEC(".maps");

/* goroutine (g address) -> the pool of its last Get, for the New call. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} getting SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GOALLOC_COUNTERS);
	__type(key, enum goalloc_counter);
	__type(value, __u64);
} counters SEC(".maps");

/* Where bpf_get_stack writes before the stack is hashed: too big for the
 * BPF stack. A uprobe program does not nest on its CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct go_stack);
} stack_scratch SEC(".maps");

enum { E_EXIST = 17, BPF_F_USER_STACK_ = 1 << 8 };

static __always_inline void count(enum goalloc_counter which, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);
	if (c)
		*c += n;
}

static __always_inline bool ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

/* Every argument register is loaded at its fixed offset, then one is
 * picked by value: a switch over the loads lets clang fold them into one
 * load at a computed context offset, which the verifier refuses. */
static __always_inline __u64 arg(struct go_regs *r, enum go_arg_reg reg)
{
	__u64 ax = r->ax, bx = r->bx, cx = r->cx, di = r->di, si = r->si;
	__u64 r8 = r->r8, r9 = r->r9, r10 = r->r10, r11 = r->r11;
	__u64 v = 0;
	if (reg == GO_REG_RAX) v = ax;
	if (reg == GO_REG_RBX) v = bx;
	if (reg == GO_REG_RCX) v = cx;
	if (reg == GO_REG_RDI) v = di;
	if (reg == GO_REG_RSI) v = si;
	if (reg == GO_REG_R8) v = r8;
	if (reg == GO_REG_R9) v = r9;
	if (reg == GO_REG_R10) v = r10;
	if (reg == GO_REG_R11) v = r11;
	return v;
}

/* The same mixing as cpuprofile's stack_hash: one-to-one steps, so two
 * stacks of one depth that differ in one frame never share a hash. */
static __always_inline __u64 stack_hash(const struct go_stack *f, __u32 depth)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ depth;
	for (__u32 i = 0; i < GOALLOC_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		h ^= f->ips[i];
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 33;
	}
	return h;
}

static __always_inline int on_malloc(struct go_regs *ctx)
{
	if (!ours())
		return 0;
	struct alloc_key key = {};
	key.size = arg(ctx, size_reg);
	count(GOALLOC_SAMPLES, 1);
	count(GOALLOC_SAMPLE_BYTES, key.size);
	/* A sample whose stack cannot be kept is still counted, under stack
	 * 0, so that the totals stay whole. */
	if (collect_stacks) {
		__u32 zero = 0;
		struct go_stack *f = bpf_map_lookup_elem(&stack_scratch, &zero);
		if (!f)
			return 0;
		/* Frame-pointer walk from mProf_Malloc's entry: the leaf is
		 * mProf_Malloc itself, then its caller's caller (the direct
		 * caller's return address is at the stack pointer, outside the
		 * frame-pointer chain) — both runtime frames that user space
		 * trims. */
		long n = bpf_get_stack(ctx, f->ips, sizeof(f->ips), BPF_F_USER_STACK_);
		if (n <= 0) {
			count(GOALLOC_LOST_STACK_FAULT, 1);
		} else {
			key.stack = stack_hash(f, (__u32)n / sizeof(__u64));
			if (!bpf_map_lookup_elem(&go_stacks, &key.stack)) {
				long err = bpf_map_update_elem(&go_stacks, &key.stack, f, BPF_NOEXIST);
				if (err != 0 && err != -E_EXIST) {
					count(GOALLOC_LOST_STACKS_FULL, 1);
					key.stack = 0;
				}
			}
		}
	}
	__u64 *c = bpf_map_lookup_elem(&alloc_samples, &key);
	if (c) {
		__sync_fetch_and_add(c, 1);
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&alloc_samples, &key, &one, BPF_NOEXIST) == 0)
		return 0;
	c = bpf_map_lookup_elem(&alloc_samples, &key);
	if (c)
		__sync_fetch_and_add(c, 1);
	else
		count(GOALLOC_LOST_COUNTS_FULL, 1);
	return 0;
}

static __always_inline int on_gc(void)
{
	if (ours())
		count(GOALLOC_GC_CYCLES, 1);
	return 0;
}

enum pool_op { POOL_GET, POOL_PUT, POOL_NEW };

static __always_inline void pool_count(__u64 pool, enum pool_op op)
{
	struct pool_counts *pc = bpf_map_lookup_elem(&pools, &pool);
	if (!pc) {
		struct pool_counts zero = {};
		bpf_map_update_elem(&pools, &pool, &zero, BPF_NOEXIST);
		pc = bpf_map_lookup_elem(&pools, &pool);
		if (!pc) {
			count(GOALLOC_LOST_POOLS_FULL, 1);
			return;
		}
	}
	/* Per CPU, and a uprobe program does not nest on its CPU. */
	switch (op) {
	case POOL_GET: pc->gets++; break;
	case POOL_PUT: pc->puts++; break;
	case POOL_NEW: pc->news++; break;
	}
}

/* sync.(*Pool).Get(p): p in RAX; the goroutine in R14. */
static __always_inline int on_pool_get(struct go_regs *ctx)
{
	if (!ours())
		return 0;
	__u64 pool = ctx->ax, g = ctx->r14;
	pool_count(pool, POOL_GET);
	bpf_map_update_elem(&getting, &g, &pool, BPF_ANY);
	return 0;
}

static __always_inline int on_pool_put(struct go_regs *ctx)
{
	if (ours())
		pool_count(ctx->ax, POOL_PUT);
	return 0;
}

/* The call of p.New inside Get: the pool is the one this goroutine's Get
 * named (Get does not return in between: New is called before it does). */
static __always_inline int on_pool_new(struct go_regs *ctx)
{
	if (!ours())
		return 0;
	__u64 g = ctx->r14;
	__u64 *pool = bpf_map_lookup_elem(&getting, &g);
	if (!pool) {
		count(GOALLOC_LOST_POOL_NEW, 1);
		return 0;
	}
	pool_count(*pool, POOL_NEW);
	return 0;
}

SEC("uprobe")
int uprobe_malloc(struct go_regs *ctx) { return SELF_COSTED(GOALLOC_HOOK_MALLOC, on_malloc(ctx)); }

SEC("uprobe")
int uprobe_gc(struct go_regs *ctx) { return SELF_COSTED(GOALLOC_HOOK_GC, on_gc()); }

SEC("uprobe")
int uprobe_pool_get(struct go_regs *ctx) { return SELF_COSTED(GOALLOC_HOOK_POOL_GET, on_pool_get(ctx)); }

SEC("uprobe")
int uprobe_pool_put(struct go_regs *ctx) { return SELF_COSTED(GOALLOC_HOOK_POOL_PUT, on_pool_put(ctx)); }

SEC("uprobe")
int uprobe_pool_new(struct go_regs *ctx) { return SELF_COSTED(GOALLOC_HOOK_POOL_NEW, on_pool_new(ctx)); }

/* The three sync.Pool hooks as one uprobe_multi link (Linux 6.6 and
 * later), the attach cookie naming the hook. Closing that one link takes
 * every pool breakpoint out of the program's text as the close starts;
 * three perf-event uprobes closed together left their breakpoints in one
 * after another, the last 150-250 ms after the close started, and every
 * Get and Put meanwhile still took the trap. */
SEC("uprobe.multi")
int uprobe_pools(struct go_regs *ctx)
{
	switch (bpf_get_attach_cookie(ctx)) {
	case GOALLOC_HOOK_POOL_GET:
		return SELF_COSTED(GOALLOC_HOOK_POOL_GET, on_pool_get(ctx));
	case GOALLOC_HOOK_POOL_PUT:
		return SELF_COSTED(GOALLOC_HOOK_POOL_PUT, on_pool_put(ctx));
	case GOALLOC_HOOK_POOL_NEW:
		return SELF_COSTED(GOALLOC_HOOK_POOL_NEW, on_pool_new(ctx));
	}
	return 0;
}
