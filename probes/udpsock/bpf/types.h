/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between udpsock.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_UDPSOCK_TYPES_H
#define PERFSCOPE_UDPSOCK_TYPES_H

/* What one socket's owner read, per CPU (the map is per-CPU). */
struct sock_reads {
	__u64 datagrams; /* recvmsg calls that returned a datagram */
	__u64 bytes;     /* what those calls returned */
};

/* One slot of the direct-mapped per-CPU table of reads and data-ready
 * wakeups (udpsock.bpf.c). ino 0: free. */
struct sock_slot {
	__u64 ino;
	struct sock_reads reads;
	__u64 wakeups;
};

/* Slots of that table; a power of two (the slot is ino & (SLOTS - 1)). */
enum { UDPSOCK_SLOTS = 1024 };

/* Events not counted because the socket map was full. */
enum udpsock_lost {
	UDPSOCK_LOST_SOCKET = 0, /* reads: the socket map was full */
	UDPSOCK_LOST_WAKEUP = 1, /* wakeups: the socket map was full */
	UDPSOCK_LOST_REASONS = 2,
};

/* Reads counted in total, per CPU (the totals map): what the overhead
 * budget's estimate of the reads scales, and the share of the namespace's
 * reads they are, both counted by the same program over the same instants. */
enum udpsock_total {
	UDPSOCK_TOTAL_READS = 0,    /* datagrams read from the counted sockets */
	UDPSOCK_TOTAL_NS_READS = 1, /* datagrams read from any UDP socket of the namespace */
	UDPSOCK_TOTALS = 2,
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum udpsock_hook {
	UDPSOCK_HOOK_RECV_LENGTH,
	UDPSOCK_HOOK_DATA_READY,
};

#endif
