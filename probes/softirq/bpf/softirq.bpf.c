// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * softirq: per-CPU × per-vector count and run time of softirqs, and the
 * latency from softirq_raise to softirq_entry for NET_RX and NET_TX.
 *
 * The same three handlers are compiled three times, once per attach method:
 * tp_btf (typed args, needs BTF), raw_tp (u64 args, no tracefs) and classic
 * tracepoints (needs tracefs). The loader keeps the first method the kernel
 * accepts and drops the other programs before loading.
 *
 * Everything is aggregated in per-CPU arrays, so the hot path takes no lock
 * and touches only the local CPU's cache lines; user space sums or reads per
 * CPU and computes deltas.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum softirq_hook);

/* False when softirq_raise is left unattached (Options.NoLatency): entry
 * then skips looking for a raise time that is never written, on a path
 * that runs once per packet in a flood. */
const volatile bool latency = true;

/* Index = vector. Per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, struct softirq_vec_stat);
} softirq_stats SEC(".maps");

/* Entry timestamp of the softirq running on this CPU, per vector. Softirqs do
 * not nest on one CPU, but keeping one slot per vector makes a lost exit
 * (program attached between an entry and its exit) harmless. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, __u64);
} entry_ts SEC(".maps");

/* First raise time since the vector last ran on this CPU. raise_softirq()
 * always marks the local CPU pending, so raise and entry of one pending bit
 * happen on the same CPU. Zero means "not raised". */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_SOFTIRQS);
	__type(key, __u32);
	__type(value, __u64);
} raise_ts SEC(".maps");

/* Index 0 = NET_TX, 1 = NET_RX. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct softirq_latency_hist);
} net_latency SEC(".maps");


/* floor(log2(v)) by halving search: no loop, so nothing for the verifier to
 * bound. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 slot = log2_u64(v);
	return slot < SOFTIRQ_LAT_SLOTS ? slot : SOFTIRQ_LAT_SLOTS - 1;
}

static __always_inline int on_raise(__u32 vec)
{
	if (vec != NET_RX_SOFTIRQ && vec != NET_TX_SOFTIRQ)
		return 0;
	__u64 *ts = bpf_map_lookup_elem(&raise_ts, &vec);
	if (ts && *ts == 0)
		*ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int on_entry(__u32 vec)
{
	if (vec >= NR_SOFTIRQS)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 *ts = bpf_map_lookup_elem(&entry_ts, &vec);
	if (ts)
		*ts = now;

	if (!latency || (vec != NET_RX_SOFTIRQ && vec != NET_TX_SOFTIRQ))
		return 0;
	__u64 *raised = bpf_map_lookup_elem(&raise_ts, &vec);
	if (!raised || *raised == 0)
		return 0;
	__u64 delta = now - *raised;
	*raised = 0;
	__u32 idx = vec == NET_RX_SOFTIRQ ? 1 : 0;
	struct softirq_latency_hist *h = bpf_map_lookup_elem(&net_latency, &idx);
	if (!h)
		return 0;
	__u32 slot = log2_slot(delta);
	if (slot < SOFTIRQ_LAT_SLOTS) /* re-checked for the verifier */
		h->slots[slot]++;
	return 0;
}

static __always_inline int on_exit(__u32 vec)
{
	if (vec >= NR_SOFTIRQS)
		return 0;
	__u64 *ts = bpf_map_lookup_elem(&entry_ts, &vec);
	if (!ts || *ts == 0)
		return 0;
	__u64 delta = bpf_ktime_get_ns() - *ts;
	*ts = 0;
	struct softirq_vec_stat *s = bpf_map_lookup_elem(&softirq_stats, &vec);
	if (!s)
		return 0;
	s->count++;
	s->time_ns += delta;
	return 0;
}

/* tp_btf: typed arguments from the tracepoint's BTF prototype. */
SEC("tp_btf/softirq_raise")
int BPF_PROG(btf_softirq_raise, unsigned int vec) { return SELF_COSTED(SOFTIRQ_HOOK_RAISE, on_raise(vec)); }
SEC("tp_btf/softirq_entry")
int BPF_PROG(btf_softirq_entry, unsigned int vec) { return SELF_COSTED(SOFTIRQ_HOOK_ENTRY, on_entry(vec)); }
SEC("tp_btf/softirq_exit")
int BPF_PROG(btf_softirq_exit, unsigned int vec) { return SELF_COSTED(SOFTIRQ_HOOK_EXIT, on_exit(vec)); }

/* raw_tp: same arguments, read as u64 from the context. */
SEC("raw_tp/softirq_raise")
int raw_softirq_raise(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_RAISE, on_raise((__u32)ctx->args[0])); }
SEC("raw_tp/softirq_entry")
int raw_softirq_entry(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_ENTRY, on_entry((__u32)ctx->args[0])); }
SEC("raw_tp/softirq_exit")
int raw_softirq_exit(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_EXIT, on_exit((__u32)ctx->args[0])); }

/* Classic tracepoints: the record layout from tracefs' format file. */
SEC("tracepoint/irq/softirq_raise")
int tp_softirq_raise(struct trace_event_raw_softirq *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_RAISE, on_raise(ctx->vec)); }
SEC("tracepoint/irq/softirq_entry")
int tp_softirq_entry(struct trace_event_raw_softirq *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_ENTRY, on_entry(ctx->vec)); }
SEC("tracepoint/irq/softirq_exit")
int tp_softirq_exit(struct trace_event_raw_softirq *ctx) { return SELF_COSTED(SOFTIRQ_HOOK_EXIT, on_exit(ctx->vec)); }
