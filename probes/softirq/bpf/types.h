/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between softirq.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_SOFTIRQ_TYPES_H
#define PERFSCOPE_SOFTIRQ_TYPES_H

/* Number of log2 buckets of the raise→entry latency histograms: bucket i
 * counts latencies in [2^i, 2^(i+1)) ns; the last bucket is open-ended
 * (2^31 ns ≈ 2.1 s). */
enum { SOFTIRQ_LAT_SLOTS = 32 };

/* Slots of self_cost (selfcost.h), one per hook. */
enum softirq_hook {
	SOFTIRQ_HOOK_RAISE,
	SOFTIRQ_HOOK_ENTRY,
	SOFTIRQ_HOOK_EXIT,
};

/* Per-CPU, per-vector totals since load. */
struct softirq_vec_stat {
	__u64 count;
	__u64 time_ns;
};

/* Raise→entry latency histogram of one vector on one CPU. */
struct softirq_latency_hist {
	__u64 slots[SOFTIRQ_LAT_SLOTS];
};

#endif
