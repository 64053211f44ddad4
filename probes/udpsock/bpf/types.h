/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between udpsock.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_UDPSOCK_TYPES_H
#define PERFSCOPE_UDPSOCK_TYPES_H

/* What one socket's owner read, per CPU (the map is per-CPU). */
struct sock_reads {
	__u64 datagrams; /* recvmsg calls that returned a datagram */
	__u64 bytes;     /* what those calls returned */
};

/* Events not counted because the socket map was full. */
enum udpsock_lost {
	UDPSOCK_LOST_SOCKET = 0, /* reads: the socket map was full */
	UDPSOCK_LOST_WAKEUP = 1, /* wakeups: the socket map was full */
	UDPSOCK_LOST_REASONS = 2,
};

#endif
