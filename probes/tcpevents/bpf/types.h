/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between tcpevents.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_TCPEVENTS_TYPES_H
#define PERFSCOPE_TCPEVENTS_TYPES_H

/* What happened on the connection. */
enum tcpevents_event {
	TCPEV_RETRANSMIT = 0,        /* tcp:tcp_retransmit_skb */
	TCPEV_RETRANSMIT_SYNACK = 1, /* tcp:tcp_retransmit_synack */
	TCPEV_RESET_SENT = 2,        /* tcp:tcp_send_reset */
	TCPEV_RESET_RECEIVED = 3,    /* tcp:tcp_receive_reset */
	TCPEV_EVENTS = 4,
};

/* Why a segment was retransmitted, from the socket's state at the time:
 * the tracepoint itself does not say. */
enum tcpevents_rtx_kind {
	TCPEV_RTX_OTHER = 0, /* none of the below (Open/Disorder/CWR) */
	TCPEV_RTX_RTO = 1,   /* in Loss: the retransmission timer expired */
	TCPEV_RTX_FAST = 2,  /* in Recovery: fast retransmit (dupacks, SACK, RACK) */
	TCPEV_RTX_TLP = 3,   /* the tail loss probe timer is what fired */
	TCPEV_RTX_SYN = 4,   /* a SYN (the socket is in SYN_SENT) */
	TCPEV_RTX_KINDS = 5,
};

/* Events not counted per connection because the map was full; the totals
 * still count them. */
enum tcpevents_lost {
	TCPEV_LOST_CONN = 0,
	TCPEV_LOST_FEED = 1, /* a socket's sk_data_ready not counted: feeds full */
	TCPEV_LOSTS = 2,
};

/* One connection's events of one kind. Addresses are in network order, an
 * IPv4 address in the first 4 bytes; ports in host order, sport the local
 * one (for a reset answering a segment: that segment's destination). */
struct tcp_event_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u16 family;       /* AF_INET, AF_INET6 */
	__u16 state;        /* the socket's TCP state then, 0 when no socket */
	enum tcpevents_event event;
	__u32 detail;       /* RETRANSMIT: enum tcpevents_rtx_kind;
			     * RESET_SENT: enum sk_rst_reason (6.10+) */
	__s32 err;          /* RETRANSMIT: what the transmit returned (6.10+), 0 sent */
};

/* Count and segments (a GSO skb carries several) of a key or an event. */
struct tcp_event_count {
	__u64 events;
	__u64 segs;
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum tcpevents_hook {
	TCPEV_HOOK_RETRANSMIT_SKB,
	TCPEV_HOOK_RETRANSMIT_SYNACK,
	TCPEV_HOOK_SEND_RESET,
	TCPEV_HOOK_RECEIVE_RESET,
	TCPEV_HOOK_DATA_READY,
	TCPEV_HOOK_RECV_LENGTH,
};

/* Per TCP socket (by inode) and CPU: the times sock:sk_data_ready fired,
 * by the context that delivered the data. */
struct tcp_feed {
	__u64 softirq; /* the receive path's softirq on this CPU */
	__u64 process; /* the owner's release_sock processing the backlog */
	__u64 unknown; /* context not told (classic tracepoint, not x86-64) */
	__u64 reads;   /* sock:sock_recv_length: a thread read it on this CPU */
};

#endif
