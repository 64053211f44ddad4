/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between udpdrop.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_UDPDROP_TYPES_H
#define PERFSCOPE_UDPDROP_TYPES_H

/* Which tracepoint saw the drop. */
enum udpdrop_kind {
	UDPDROP_FAIL_QUEUE_RCV = 0, /* udp:udp_fail_queue_rcv_skb; reason = -rc */
	UDPDROP_KFREE_SKB = 2,      /* skb:kfree_skb; reason = skb_drop_reason */
};

/* Events not counted because a map was full. */
enum udpdrop_lost {
	UDPDROP_LOST_PORT = 0,
	UDPDROP_LOST_REASON = 1,
	UDPDROP_LOST_REASONS = 2,
};

/* Core skb_drop_reason values (below SKB_DROP_REASON_MAX, about 130 in
 * 6.18) are counted in an array of this many slots. */
enum { UDPDROP_REASON_SLOTS = 512 };

/* Family slots of the target port's array: unknown, AF_INET, AF_INET6. */
enum { UDPDROP_FAMILY_SLOTS = 3 };

/* Drops of one local port. family 0: the tracepoint record did not say
 * (classic udp_fail_queue_rcv_skb before 6.10). TCP port 0: a TCP drop of
 * the measured namespace whose port could not be read (see on_tcp_skb). */
struct port_drop_key {
	__u16 port;   /* local port, host order */
	__u16 family; /* AF_INET, AF_INET6 */
	enum udpdrop_kind kind;
	__u32 reason;
	__u32 proto;  /* IPPROTO_UDP or IPPROTO_TCP */
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum udpdrop_hook {
	UDPDROP_HOOK_FAIL_QUEUE_RCV,
	UDPDROP_HOOK_KFREE_SKB,
};

#endif
