/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * selfcost: every perfscope program counts its own runs, per CPU, and times
 * about 1 in SELF_TIMED_EVERY of them.
 *
 * The kernel's bpf_stats would say the same, but turning them on needs
 * CAP_SYS_ADMIN (BPF_ENABLE_STATS), counts every run of every program on
 * the machine while on (~90 ns per run here, more than most of perfscope's
 * programs), and sums over CPUs. perfscope needs its cost per CPU, all the
 * time, under a least-privilege capability set too: the overhead budget's
 * governor (recipes) reads these counters at every sampling window, and
 * the report's overhead section stays filled when bpf_stats cannot be
 * turned on.
 *
 * Cost: a per-CPU array lookup (inlined by the verifier) and an increment
 * per run, plus two bpf_ktime_get_ns() on 1 run in SELF_TIMED_EVERY. The
 * count is taken first thing, before any filter, so runs that return early
 * (another device's packet, another socket) are counted too: they cost the
 * kernel the same entry.
 *
 * Usage: one slot per hook of the object (an enum in the probe's types.h,
 * which reaches Go through bpf2go -type because it keys the map), the map
 * declared with it, and each program's body wrapped:
 *
 *   SELF_COST_MAP(enum x_hook);
 *   int BPF_PROG(btf_x, ...) { return SELF_COSTED(X_HOOK_X, on_x(...)); }
 */
#ifndef PERFSCOPE_SELFCOST_H
#define PERFSCOPE_SELFCOST_H

/* Slots of self_cost: enough for any one object's hooks. */
enum { SELF_COST_SLOTS = 8 };
/* Time 1 in SELF_TIMED_EVERY runs (a power of two). */
enum { SELF_TIMED_EVERY = 64 };

/* What one program counted about itself on one CPU since load. */
struct self_cost {
	__u64 runs;
	/* timed_runs of the runs were timed, taking timed_ns in all. */
	__u64 timed_runs;
	__u64 timed_ns;
};

/* The object's counters, keyed by its hook enum. */
#define SELF_COST_MAP(hook_enum)                                 \
	struct {                                                 \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);          \
		__uint(max_entries, SELF_COST_SLOTS);             \
		__type(key, hook_enum);                           \
		__type(value, struct self_cost);                  \
	} self_costs SEC(".maps")

/* Runs expr (the program's body, an int) and counts it in slot; a statement
 * expression so that every return path of the body is inside it. */
#define SELF_COSTED(slot, expr)                                                  \
	({                                                                       \
		__u32 __sc_slot = (slot);                                        \
		__u64 __sc_t0 = 0;                                               \
		struct self_cost *__sc = bpf_map_lookup_elem(&self_costs, &__sc_slot); \
		if (__sc && (__sc->runs++ & (SELF_TIMED_EVERY - 1)) == 0)       \
			__sc_t0 = bpf_ktime_get_ns();                            \
		int __sc_ret = (expr);                                           \
		if (__sc && __sc_t0) {                                           \
			__sc->timed_runs++;                                      \
			__sc->timed_ns += bpf_ktime_get_ns() - __sc_t0;          \
		}                                                                \
		__sc_ret;                                                        \
	})

#endif
