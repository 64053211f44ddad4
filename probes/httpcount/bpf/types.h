/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Types shared between httpcount.bpf.c and Go (through bpf2go -type). */
#ifndef PERFSCOPE_HTTPCOUNT_TYPES_H
#define PERFSCOPE_HTTPCOUNT_TYPES_H

/* Response starts are counted per port slot (the port's index in the
 * loader's list) and status code, at slot * HTTPCOUNT_STATUSES + status:
 * the status line's three digits, 100-599 from a server that follows RFC
 * 9110, and 0 when they did not parse or fall outside (the report's
 * "unparsed" either way). The arrays are per CPU: 600 slots keep 64 ports
 * on 128 CPUs to 39 MiB, where every three-digit code would take 64. */
enum { HTTPCOUNT_STATUSES = 600 };

/* Request-target bytes kept per request line: the path up to '?', ' ' or
 * the end of what was read, with every run of digits folded into one '#'
 * so /orders/17 and /orders/4242 are one key. */
enum { HTTPCOUNT_TARGET_LEN = 60 };

enum http_method {
	HTTP_OTHER = 0,
	HTTP_GET = 1,
	HTTP_POST = 2,
	HTTP_PUT = 3,
	HTTP_DELETE = 4,
	HTTP_PATCH = 5,
	HTTP_HEAD = 6,
	HTTP_OPTIONS = 7,
};

/* A request line read from an accepted socket of a counted port. */
struct request_key {
	__u16 port;
	__u8 truncated; /* the path was longer than HTTPCOUNT_TARGET_LEN */
	__u8 pad;
	enum http_method method;
	char target[HTTPCOUNT_TARGET_LEN];
};

/* Events not counted. */
enum httpcount_lost {
	HTTPCOUNT_LOST_REQUEST = 0,  /* the requests map was full */
	HTTPCOUNT_LOST_INFLIGHT = 1, /* a syscall could not be remembered between enter and exit */
	HTTPCOUNT_LOST_READ = 2,     /* user memory could not be read (paged out) */
	/* a write on an HTTP/2 connection whose frames were not all walked:
	 * the frame bound, a frame header that did not parse, frames past the
	 * first iovec of a vectored write, or the connection's state lost (its
	 * map full) */
	HTTPCOUNT_LOST_H2_UNPARSED = 3,
	/* a write on a connection whose protocol is not known yet (opened
	 * before the probe and first seen mid-stream, or not HTTP) */
	HTTPCOUNT_LOST_UNRECOGNIZED = 4,
	HTTPCOUNT_LOST_REASONS = 5,
};

/* Slots of self_cost (selfcost.h), one per hook. */
enum httpcount_hook {
	HTTPCOUNT_HOOK_SYS_ENTER,
	HTTPCOUNT_HOOK_SYS_EXIT,
	HTTPCOUNT_HOOK_SOCK_SEND,
	HTTPCOUNT_HOOK_SOCK_RECV,
};

#endif
