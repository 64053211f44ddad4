/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between netqueue.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_NETQUEUE_TYPES_H
#define PERFSCOPE_NETQUEUE_TYPES_H

/* Map sizes. Queue indexes at or above NETQUEUE_MAX_QUEUES are not counted
 * (lost); NICs have at most a few hundred queues. */
enum netqueue_limits {
	NETQUEUE_MAX_QUEUES = 1024,
	NETQUEUE_MAX_NAPI = 4096,
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum netqueue_hook {
	NETQUEUE_HOOK_NAPI_POLL,
	NETQUEUE_HOOK_RECEIVE,
	NETQUEUE_HOOK_XMIT,
	NETQUEUE_HOOK_QDISC_ENQUEUE,
	NETQUEUE_HOOK_QDISC_DEQUEUE,
};

/* Why an event could not be counted: a queue index beyond the per-queue
 * arrays (RX, TX, QDISC) or a full NAPI hash (NAPI, NAPI_QUEUE). */
enum netqueue_lost {
	NETQUEUE_LOST_NAPI = 0,
	NETQUEUE_LOST_RX = 1,
	NETQUEUE_LOST_TX = 2,
	NETQUEUE_LOST_QDISC = 3,
	NETQUEUE_LOST_NAPI_QUEUE = 4,
	NETQUEUE_LOST_REASONS = 5,
};

/* One NAPI instance. ifindex is the target's, or 0 for the per-CPU backlog (process_backlog:
 * loopback, RPS and drivers without NAPI), whose napi_struct has no device. */
struct napi_key {
	__u32 napi_id;
	__s32 ifindex;
};

/* Per CPU (the map is per-CPU). */
struct napi_stat {
	__u64 polls;
	__u64 work;             /* packets processed */
	__u64 budget_exhausted; /* polls with work >= budget: more was pending */
};

/* Per-queue values live in per-CPU arrays indexed by the queue: for RX the
 * raw skb->queue_mapping (see netqueue.bpf.c), for TX and qdisc the TX
 * queue index. */
struct traffic_stat {
	__u64 packets;
	__u64 bytes;
};

struct qdisc_stat {
	__u64 enqueues;
	__u64 dequeues;          /* dequeue calls that returned packets */
	__u64 dequeued_packets;  /* packets they returned (bulk dequeue) */
};

/* Which NAPI instance delivered packets carrying which raw queue_mapping:
 * counted from skb->napi_id at netif_receive_skb, so the NAPI → queue
 * mapping is exact even where netlink does not list it. raw_queue is
 * skb->queue_mapping unchanged. */
struct napi_queue_key {
	__u32 napi_id;
	__s32 ifindex;
	__u32 raw_queue;
	__u32 _pad;
};

#endif
