// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * netqueue: traffic per NIC queue and per CPU, from the kernel's side, for
 * one device.
 *
 *   napi:napi_poll          polls, work and budget-exhausted polls per NAPI
 *                           instance of the device (and the per-CPU backlog)
 *   net:netif_receive_skb   packets/bytes per RX queue (skb->queue_mapping)
 *   net:net_dev_start_xmit  packets/bytes per TX queue
 *   qdisc:qdisc_enqueue/dequeue  per TX queue (skb->queue_mapping)
 *
 * The device is named by (network namespace inode, ifindex): an ifindex is
 * unique only inside one namespace (lo is 1 in every one), so both are
 * compared, ifindex first because it is one load and rejects most packets.
 *
 * Cost per event is what matters here: netif_receive_skb and
 * net_dev_start_xmit run once per packet. So:
 *   - tp_btf programs read fields through the BTF-typed arguments with plain
 *     loads, which the verifier turns into fault-safe PROBE_MEM loads; only
 *     the raw_tp and classic tracepoint fallbacks, whose arguments are
 *     untyped integers, pay a bpf_probe_read_kernel call per field (READ()
 *     in access.h).
 *   - per-queue counters are per-CPU arrays indexed by the queue: the
 *     lookup is an inlined bounds check and a per-CPU offset, no hashing,
 *     and no insert ever happens on the packet path. Each CPU has its own
 *     slot, so no atomics, and the per-CPU values user space reads are the
 *     queue x CPU matrix.
 *   - NAPI ids are large, sparse numbers, so the device's NAPI instances
 *     stay in a per-CPU hash; a new key is inserted with its first event's
 *     counts already in it (no insert-then-lookup). The per-CPU backlog
 *     (loopback, RPS), which polls once per packet on loopback, has its own
 *     one-slot per-CPU array instead.
 * Events that do not fit (a queue index >= MAX_QUEUES, a full hash) are
 * counted in `lost`.
 *
 * Each handler is compiled three times (tp_btf, raw_tp, classic tracepoint);
 * the loader keeps the first method the kernel accepts.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "access.h"
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum netqueue_hook);

/* The device: its ifindex and the inode of its network namespace. The
 * per-CPU backlog NAPI has no device and is always counted, as ifindex 0. */
const volatile __s32 target_ifindex = 0;
const volatile __u32 target_netns = 0;
/* Number of possible CPUs. skb->napi_id shares its slot with sender_cpu
 * (CPU + 1), and NAPI ids start above NR_CPUS, so values up to this are not
 * NAPI ids; skipping them saves a map operation per packet on loopback. */
const volatile __u32 possible_cpus = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETQUEUE_MAX_NAPI);
	__type(key, struct napi_key);
	__type(value, struct napi_stat);
} napi_stats SEC(".maps");

/* The per-CPU backlog NAPI (process_backlog: no device, napi_id 0). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct napi_stat);
} backlog_stats SEC(".maps");

/* Indexed by the raw skb->queue_mapping (see on_receive). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETQUEUE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct traffic_stat);
} rx_stats SEC(".maps");

/* Indexed by TX queue. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETQUEUE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct traffic_stat);
} tx_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETQUEUE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct qdisc_stat);
} qdisc_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NETQUEUE_MAX_NAPI);
	__type(key, struct napi_queue_key);
	__type(value, __u64);
} napi_queues SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NETQUEUE_LOST_REASONS);
	__type(key, enum netqueue_lost);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(enum netqueue_lost why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);
	if (n)
		(*n)++;
}

/* Whether dev is the target device. A NULL dev reads as ifindex 0 on both
 * paths (a faulting PROBE_MEM load and a failed probe read yield 0). */
static __always_inline bool is_target(const struct net_device *dev, const bool direct)
{
	if (READ(direct, dev, ifindex) != target_ifindex)
		return false;
	struct net *net = READ(direct, dev, nd_net.net);
	return READ(direct, net, ns.inum) == target_netns;
}

/* This CPU's slot of a per-queue array; NULL (and one lost event) when the
 * queue index is beyond the array. */
static __always_inline void *queue_slot(void *map, __u32 queue, enum netqueue_lost why)
{
	void *v = bpf_map_lookup_elem(map, &queue);
	if (!v)
		count_lost(why);
	return v;
}

static __always_inline int on_napi_poll(struct napi_struct *napi, int work, int budget, const bool direct)
{
	if (!napi)
		return 0;
	struct net_device *dev = READ(direct, napi, dev);
	__u64 w = work > 0 ? work : 0;
	__u64 exhausted = work >= budget;
	struct napi_stat *s;
	if (!dev) {
		__u32 zero = 0;
		s = bpf_map_lookup_elem(&backlog_stats, &zero);
		if (s) {
			s->polls++;
			s->work += w;
			s->budget_exhausted += exhausted;
		}
		return 0;
	}
	if (!is_target(dev, direct))
		return 0;
	struct napi_key key = { .napi_id = READ(direct, napi, napi_id), .ifindex = target_ifindex };
	s = bpf_map_lookup_elem(&napi_stats, &key);
	if (!s) {
		/* A per-CPU hash insert from BPF sets this CPU's value and zeroes
		 * the others. EEXIST: another CPU inserted the key meanwhile. */
		struct napi_stat first = { .polls = 1, .work = w, .budget_exhausted = exhausted };
		if (bpf_map_update_elem(&napi_stats, &key, &first, BPF_NOEXIST) == 0)
			return 0;
		s = bpf_map_lookup_elem(&napi_stats, &key);
		if (!s) {
			count_lost(NETQUEUE_LOST_NAPI);
			return 0;
		}
	}
	s->polls++;
	s->work += w;
	s->budget_exhausted += exhausted;
	return 0;
}

static __always_inline void count_napi_queue(__u32 napi_id, __u32 raw_queue)
{
	struct napi_queue_key key = { .napi_id = napi_id, .ifindex = target_ifindex, .raw_queue = raw_queue };
	__u64 *n = bpf_map_lookup_elem(&napi_queues, &key);
	if (n) {
		(*n)++;
		return;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&napi_queues, &key, &one, BPF_NOEXIST) == 0)
		return;
	n = bpf_map_lookup_elem(&napi_queues, &key);
	if (n)
		(*n)++;
	else
		count_lost(NETQUEUE_LOST_NAPI_QUEUE);
}

static __always_inline int on_receive(struct sk_buff *skb, const bool direct)
{
	if (!skb)
		return 0;
	struct net_device *dev = READ(direct, skb, dev);
	if (!is_target(dev, direct))
		return 0;
	/* Raw queue_mapping: skb_record_rx_queue() drivers store queue + 1
	 * (0: not recorded), while veth leaves the peer's TX queue, which it
	 * maps 1:1 to its RX queue. User space applies the convention. */
	__u32 raw = READ(direct, skb, queue_mapping);
	struct traffic_stat *s = queue_slot(&rx_stats, raw, NETQUEUE_LOST_RX);
	if (s) {
		s->packets++;
		s->bytes += READ(direct, skb, len);
	}
	if (!bpf_core_field_exists(skb->napi_id))
		return 0;
	__u32 napi_id = READ(direct, skb, napi_id);
	if (napi_id > possible_cpus)
		count_napi_queue(napi_id, raw);
	return 0;
}

static __always_inline int on_xmit(const struct sk_buff *skb, const struct net_device *dev, const bool direct)
{
	if (!skb)
		return 0;
	if (!dev)
		dev = READ(direct, skb, dev);
	if (!is_target(dev, direct))
		return 0;
	struct traffic_stat *s = queue_slot(&tx_stats, READ(direct, skb, queue_mapping), NETQUEUE_LOST_TX);
	if (s) {
		s->packets++;
		s->bytes += READ(direct, skb, len);
	}
	return 0;
}

/* The qdisc's TX queue is the one netdev_core_pick_tx() stored in
 * skb->queue_mapping before enqueue; a dequeue returning packets has the
 * first of them. Dequeues that returned nothing are not counted. */
static __always_inline int on_qdisc(const struct sk_buff *skb, int packets, bool enqueue, const bool direct)
{
	if (!skb || (!enqueue && packets <= 0))
		return 0;
	if (!is_target(READ(direct, skb, dev), direct))
		return 0;
	struct qdisc_stat *s = queue_slot(&qdisc_stats, READ(direct, skb, queue_mapping), NETQUEUE_LOST_QDISC);
	if (!s)
		return 0;
	if (enqueue) {
		s->enqueues++;
	} else {
		s->dequeues++;
		s->dequeued_packets += packets;
	}
	return 0;
}

/* tp_btf: typed arguments from the tracepoint's BTF prototype, read with
 * plain loads. */
SEC("tp_btf/napi_poll")
int BPF_PROG(btf_napi_poll, struct napi_struct *napi, int work, int budget)
{ return SELF_COSTED(NETQUEUE_HOOK_NAPI_POLL, on_napi_poll(napi, work, budget, true)); }
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(btf_netif_receive_skb, struct sk_buff *skb) { return SELF_COSTED(NETQUEUE_HOOK_RECEIVE, on_receive(skb, true)); }
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(btf_net_dev_start_xmit, const struct sk_buff *skb, const struct net_device *dev)
{ return SELF_COSTED(NETQUEUE_HOOK_XMIT, on_xmit(skb, dev, true)); }
SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(btf_qdisc_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{ return SELF_COSTED(NETQUEUE_HOOK_QDISC_ENQUEUE, on_qdisc(skb, 1, true, true)); }
SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(btf_qdisc_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets, struct sk_buff *skb)
{ return SELF_COSTED(NETQUEUE_HOOK_QDISC_DEQUEUE, on_qdisc(skb, packets, false, true)); }

/* raw_tp: the same arguments as u64, read with CO-RE probe reads. */
SEC("raw_tp/napi_poll")
int raw_napi_poll(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_NAPI_POLL, on_napi_poll((void *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2], false)); }
SEC("raw_tp/netif_receive_skb")
int raw_netif_receive_skb(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(NETQUEUE_HOOK_RECEIVE, on_receive((void *)ctx->args[0], false)); }
SEC("raw_tp/net_dev_start_xmit")
int raw_net_dev_start_xmit(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_XMIT, on_xmit((void *)ctx->args[0], (void *)ctx->args[1], false)); }
SEC("raw_tp/qdisc_enqueue")
int raw_qdisc_enqueue(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(NETQUEUE_HOOK_QDISC_ENQUEUE, on_qdisc((void *)ctx->args[2], 1, true, false)); }
SEC("raw_tp/qdisc_dequeue")
int raw_qdisc_dequeue(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_QDISC_DEQUEUE, on_qdisc((void *)ctx->args[3], (int)ctx->args[2], false, false)); }

/* Classic tracepoints: the records carry the skb/napi pointers, read with
 * CO-RE probe reads. */
SEC("tracepoint/napi/napi_poll")
int tp_napi_poll(struct trace_event_raw_napi_poll *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_NAPI_POLL, on_napi_poll(ctx->napi, ctx->work, ctx->budget, false)); }
SEC("tracepoint/net/netif_receive_skb")
int tp_netif_receive_skb(struct trace_event_raw_net_dev_template *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_RECEIVE, on_receive(ctx->skbaddr, false)); }
SEC("tracepoint/net/net_dev_start_xmit")
int tp_net_dev_start_xmit(struct trace_event_raw_net_dev_start_xmit *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_XMIT, on_xmit(ctx->skbaddr, 0, false)); }
SEC("tracepoint/qdisc/qdisc_enqueue")
int tp_qdisc_enqueue(struct trace_event_raw_qdisc_enqueue *ctx) { return SELF_COSTED(NETQUEUE_HOOK_QDISC_ENQUEUE, on_qdisc(ctx->skbaddr, 1, true, false)); }
SEC("tracepoint/qdisc/qdisc_dequeue")
int tp_qdisc_dequeue(struct trace_event_raw_qdisc_dequeue *ctx)
{ return SELF_COSTED(NETQUEUE_HOOK_QDISC_DEQUEUE, on_qdisc(ctx->skbaddr, ctx->packets, false, false)); }
