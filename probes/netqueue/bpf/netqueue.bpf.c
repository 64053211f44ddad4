// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * netqueue: traffic per NIC queue and per CPU, from the kernel's side.
 *
 *   napi:napi_poll          polls, work and budget-exhausted polls per NAPI
 *                           instance (and its device)
 *   net:netif_receive_skb   packets/bytes per RX queue (skb->queue_mapping)
 *   net:net_dev_start_xmit  packets/bytes per TX queue
 *   qdisc:qdisc_enqueue/dequeue  per TX queue (skb->queue_mapping)
 *
 * Every map is a per-CPU hash keyed without the CPU: each CPU updates its
 * own copy with no atomics, and the per-CPU values user space reads are the
 * queue × CPU matrix. When a map is full the event is counted in `lost`.
 *
 * Each handler is compiled three times (tp_btf, raw_tp, classic tracepoint);
 * the loader keeps the first method the kernel accepts.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Only count this device (0: every device). The per-CPU backlog NAPI has no
 * device and is always counted, as ifindex 0. */
const volatile __s32 target_ifindex = 0;
/* Number of possible CPUs. skb->napi_id shares its slot with sender_cpu
 * (CPU + 1), and NAPI ids start above NR_CPUS, so values up to this are not
 * NAPI ids; skipping them saves a map update per packet on loopback. */
const volatile __u32 possible_cpus = 0;

#define MAX_NAPI 4096
#define MAX_QUEUES 8192

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_NAPI);
	__type(key, struct napi_key);
	__type(value, struct napi_stat);
} napi_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_QUEUES);
	__type(key, struct queue_key);
	__type(value, struct traffic_stat);
} rx_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_QUEUES);
	__type(key, struct queue_key);
	__type(value, struct traffic_stat);
} tx_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_QUEUES);
	__type(key, struct queue_key);
	__type(value, struct qdisc_stat);
} qdisc_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_QUEUES);
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

/* The value for key on this CPU, created zeroed when absent. NULL (and one
 * lost event) when the map is full. */
static __always_inline void *upsert(void *map, const void *key, const void *zero, enum netqueue_lost why)
{
	void *v = bpf_map_lookup_elem(map, key);
	if (v)
		return v;
	/* EEXIST means another CPU created it meanwhile: the lookup finds it. */
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		count_lost(why);
	return v;
}

static __always_inline bool skip_ifindex(__s32 ifindex)
{
	return target_ifindex && ifindex != target_ifindex;
}

static __always_inline int dev_ifindex(const struct net_device *dev)
{
	return dev ? BPF_CORE_READ(dev, ifindex) : 0;
}

static __always_inline int on_napi_poll(struct napi_struct *napi, int work, int budget)
{
	if (!napi)
		return 0;
	struct napi_key key = {
		.napi_id = BPF_CORE_READ(napi, napi_id),
		.ifindex = dev_ifindex(BPF_CORE_READ(napi, dev)),
	};
	if (key.ifindex && skip_ifindex(key.ifindex))
		return 0;
	struct napi_stat zero = {};
	struct napi_stat *s = upsert(&napi_stats, &key, &zero, NETQUEUE_LOST_NAPI);
	if (!s)
		return 0;
	s->polls++;
	if (work > 0)
		s->work += work;
	if (work >= budget)
		s->budget_exhausted++;
	return 0;
}

static __always_inline void count_traffic(void *map, struct queue_key *key, __u32 len, enum netqueue_lost why)
{
	struct traffic_stat zero = {};
	struct traffic_stat *s = upsert(map, key, &zero, why);
	if (!s)
		return;
	s->packets++;
	s->bytes += len;
}

static __always_inline int on_receive(struct sk_buff *skb)
{
	if (!skb)
		return 0;
	struct queue_key key = { .ifindex = dev_ifindex(BPF_CORE_READ(skb, dev)) };
	if (skip_ifindex(key.ifindex))
		return 0;
	/* Raw queue_mapping: skb_record_rx_queue() drivers store queue + 1
	 * (0: not recorded), while veth leaves the peer's TX queue, which it
	 * maps 1:1 to its RX queue. User space applies the convention. */
	__u16 qm = BPF_CORE_READ(skb, queue_mapping);
	key.queue = qm;
	count_traffic(&rx_stats, &key, BPF_CORE_READ(skb, len), NETQUEUE_LOST_RX);

	if (!bpf_core_field_exists(skb->napi_id))
		return 0;
	struct napi_queue_key nq = {
		.napi_id = BPF_CORE_READ(skb, napi_id),
		.ifindex = key.ifindex,
		.raw_queue = qm,
	};
	if (nq.napi_id <= possible_cpus)
		return 0;
	__u64 zero = 0;
	__u64 *n = upsert(&napi_queues, &nq, &zero, NETQUEUE_LOST_NAPI_QUEUE);
	if (n)
		(*n)++;
	return 0;
}

static __always_inline int on_xmit(const struct sk_buff *skb, const struct net_device *dev)
{
	if (!skb)
		return 0;
	if (!dev)
		dev = BPF_CORE_READ(skb, dev);
	struct queue_key key = {
		.ifindex = dev_ifindex(dev),
		.queue = BPF_CORE_READ(skb, queue_mapping),
	};
	if (skip_ifindex(key.ifindex))
		return 0;
	count_traffic(&tx_stats, &key, BPF_CORE_READ(skb, len), NETQUEUE_LOST_TX);
	return 0;
}

/* The qdisc's TX queue is the one netdev_core_pick_tx() stored in
 * skb->queue_mapping before enqueue; a dequeue returning packets has the
 * first of them. Dequeues that returned nothing are not counted. */
static __always_inline int on_qdisc(const struct sk_buff *skb, int packets, bool enqueue)
{
	if (!skb || (!enqueue && packets <= 0))
		return 0;
	struct queue_key key = {
		.ifindex = dev_ifindex(BPF_CORE_READ(skb, dev)),
		.queue = BPF_CORE_READ(skb, queue_mapping),
	};
	if (skip_ifindex(key.ifindex))
		return 0;
	struct qdisc_stat zero = {};
	struct qdisc_stat *s = upsert(&qdisc_stats, &key, &zero, NETQUEUE_LOST_QDISC);
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

/* tp_btf: typed arguments from the tracepoint's BTF prototype. */
SEC("tp_btf/napi_poll")
int BPF_PROG(btf_napi_poll, struct napi_struct *napi, int work, int budget)
{ return on_napi_poll(napi, work, budget); }
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(btf_netif_receive_skb, struct sk_buff *skb) { return on_receive(skb); }
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(btf_net_dev_start_xmit, const struct sk_buff *skb, const struct net_device *dev)
{ return on_xmit(skb, dev); }
SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(btf_qdisc_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{ return on_qdisc(skb, 1, true); }
SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(btf_qdisc_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets, struct sk_buff *skb)
{ return on_qdisc(skb, packets, false); }

/* raw_tp: the same arguments as u64. */
SEC("raw_tp/napi_poll")
int raw_napi_poll(struct bpf_raw_tracepoint_args *ctx)
{ return on_napi_poll((void *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2]); }
SEC("raw_tp/netif_receive_skb")
int raw_netif_receive_skb(struct bpf_raw_tracepoint_args *ctx) { return on_receive((void *)ctx->args[0]); }
SEC("raw_tp/net_dev_start_xmit")
int raw_net_dev_start_xmit(struct bpf_raw_tracepoint_args *ctx)
{ return on_xmit((void *)ctx->args[0], (void *)ctx->args[1]); }
SEC("raw_tp/qdisc_enqueue")
int raw_qdisc_enqueue(struct bpf_raw_tracepoint_args *ctx) { return on_qdisc((void *)ctx->args[2], 1, true); }
SEC("raw_tp/qdisc_dequeue")
int raw_qdisc_dequeue(struct bpf_raw_tracepoint_args *ctx)
{ return on_qdisc((void *)ctx->args[3], (int)ctx->args[2], false); }

/* Classic tracepoints: the records carry the skb/napi pointers, read with
 * CO-RE probe reads. */
SEC("tracepoint/napi/napi_poll")
int tp_napi_poll(struct trace_event_raw_napi_poll *ctx)
{ return on_napi_poll(ctx->napi, ctx->work, ctx->budget); }
SEC("tracepoint/net/netif_receive_skb")
int tp_netif_receive_skb(struct trace_event_raw_net_dev_template *ctx)
{ return on_receive(ctx->skbaddr); }
SEC("tracepoint/net/net_dev_start_xmit")
int tp_net_dev_start_xmit(struct trace_event_raw_net_dev_start_xmit *ctx)
{ return on_xmit(ctx->skbaddr, 0); }
SEC("tracepoint/qdisc/qdisc_enqueue")
int tp_qdisc_enqueue(struct trace_event_raw_qdisc_enqueue *ctx) { return on_qdisc(ctx->skbaddr, 1, true); }
SEC("tracepoint/qdisc/qdisc_dequeue")
int tp_qdisc_dequeue(struct trace_event_raw_qdisc_dequeue *ctx)
{ return on_qdisc(ctx->skbaddr, ctx->packets, false); }
