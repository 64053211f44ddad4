// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * httpcount: HTTP/1.x requests a process served, counted passively from its
 * own socket syscalls — no agent in the process, no uprobes, no packet
 * capture. The process's threads are the only ones looked at (one tgid),
 * and only sockets whose local port is one of the counted (listening) ports:
 * an accepted connection keeps its listener's local port, while the
 * process's own outbound connections use ephemeral ports and are ignored.
 *
 *   sock:sock_send_length / sock_recv_length (Linux 6.3 and later), else
 *   raw_syscalls:sys_enter / sys_exit
 *
 * The socket tracepoints fire once per socket send or receive, after it,
 * with the socket and what it returned; the buffer is the syscall's own
 * argument, read from the task's saved user registers. The raw_syscalls
 * pair fires for every syscall of every task on the machine and makes
 * every syscall take the kernel's slow tracing path while attached, so it
 * is only the fallback for kernels without the socket tracepoints (and
 * for a caller that asks for it).
 *
 * Write side (write, writev, sendto, sendmsg): a buffer that starts with
 * "HTTP/1." is a response start; its three status digits are kept. It is
 * remembered at syscall entry (where the buffer pointer is) and counted at
 * exit only when the call wrote something, so a non-blocking write that
 * returned EAGAIN and is retried counts once.
 *
 * Read side (read, readv, recvfrom, recvmsg), optional: a read that returns
 * a buffer starting with a request line ("GET /orders/17 HTTP/1.1") counts
 * that request's method and path, folded so one endpoint is one key (query
 * string dropped, digit runs become '#'). The buffer is only filled at exit,
 * so the pointer is remembered at entry.
 *
 * A read that returns fewer bytes than a method and its space ("OPTIONS ") may
 * be the start of a request split across reads: Go's net/http reads one
 * byte ahead while a handler runs (to notice a client closing), so on a
 * kept-alive connection the next request's first byte arrives alone and the
 * next read carries the rest. Those bytes are kept per socket (carry) and
 * put in front of that socket's next read.
 *
 * The response count is the request count; the request lines only split it
 * by endpoint (a read carrying two pipelined requests shows one line; a
 * response is always a write of its own). TLS and HTTP/2 are not visible
 * here: the caller falls back to a metrics source.
 *
 * Syscall numbers are set by the loader for the running architecture; the
 * tp_btf and raw_tp programs read arguments from x86-64 pt_regs, so other
 * architectures use the classic tracepoint, whose record carries them.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "access.h"
#include "types.h"
#include "selfcost.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SELF_COST_MAP(enum httpcount_hook);

/* The process whose requests are counted (host pid). */
const volatile __u32 target_tgid = 0;
/* Syscall numbers of this architecture (x86-64 defaults). */
const volatile __s64 nr_read = 0;
const volatile __s64 nr_readv = 19;
const volatile __s64 nr_recvfrom = 45;
const volatile __s64 nr_recvmsg = 47;
const volatile __s64 nr_write = 1;
const volatile __s64 nr_writev = 20;
const volatile __s64 nr_sendto = 44;
const volatile __s64 nr_sendmsg = 46;
/* Parse request lines on the read side (per-endpoint counts). */
const volatile bool count_requests = true;

enum { IPPROTO_TCP_ = 6, S_IFMT_ = 0170000, S_IFSOCK_ = 0140000, MSG_PEEK_ = 2 };
enum { KIND_RESPONSE = 1, KIND_REQUEST = 2 };
/* Bytes of a read looked at for the request line: the longest method
 * ("OPTIONS ") plus the target and a terminator. */
enum { LINE_LEN = 8 + HTTPCOUNT_TARGET_LEN + 8 };

/* Flavoured kernel types (CO-RE drops the ___httpcount suffix when matching
 * kernel BTF), so these declarations cannot clash with kernel.h's. */
struct pt_regs___httpcount {
	unsigned long di;
	unsigned long si;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

struct inode___httpcount {
	unsigned short i_mode;
} __attribute__((preserve_access_index));

struct file___httpcount {
	struct inode___httpcount *f_inode;
	void *private_data;
} __attribute__((preserve_access_index));

struct fdtable___httpcount {
	unsigned int max_fds;
	struct file___httpcount **fd;
} __attribute__((preserve_access_index));

struct files_struct___httpcount {
	struct fdtable___httpcount *fdt;
} __attribute__((preserve_access_index));

struct task_struct___httpcount {
	struct files_struct___httpcount *files;
	int tgid;
} __attribute__((preserve_access_index));

struct socket___httpcount {
	struct sock *sk;
} __attribute__((preserve_access_index));

struct trace_event_raw_sys_enter___httpcount {
	struct trace_entry ent;
	long id;
	unsigned long args[6];
} __attribute__((preserve_access_index));

struct trace_event_raw_sys_exit___httpcount {
	struct trace_entry ent;
	long id;
	long ret;
} __attribute__((preserve_access_index));

/* The record of sock:sock_send_length and sock_recv_length. */
struct trace_event_raw_sock_msg_length___httpcount {
	struct trace_entry ent;
	void *sk;
	int ret;
	int flags;
} __attribute__((preserve_access_index));

/* User-space ABI structs (not kernel layouts: no CO-RE). */
struct user_iovec {
	__u64 base;
	__u64 len;
};

struct user_msghdr_head {
	__u64 name;
	__s32 namelen;
	__s32 pad;
	__u64 iov;
};

/* A syscall between entry and exit. */
struct inflight {
	__u64 buf;
	__u64 sk; /* the socket: keys a read's carry, a write's HTTP/2 state */
	__u32 len; /* the bytes at buf: the first iovec's, or ~0 for one buffer */
	__u16 port;
	__u8 kind;
	__u8 pad;
};

/* The counted ports: each one's slot (its index in the loader's list of
 * ports) plus one, 0 for a port not counted. One array element, whose
 * lookup the verifier inlines (a hash lookup was a helper call on every
 * send); the slot indexes the response counters, arrays for the same
 * reason. */
struct port_set {
	__u8 slot[65536];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct port_set);
} ports SEC(".maps");

/* The slot of a counted port, -1 for any other. */
static __always_inline int port_slot(__u16 port)
{
	__u32 zero = 0;
	struct port_set *set = bpf_map_lookup_elem(&ports, &zero);
	return set ? (int)set->slot[port] - 1 : -1;
}

static __always_inline bool counted_port(__u16 port) { return port_slot(port) >= 0; }

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight SEC(".maps");

/* The first bytes of a request whose line continues in the socket's next
 * read (at most a method and its space, less one). LRU: a connection that
 * closes right after such a read leaves its entry to be evicted. */
enum { CARRY_MAX = 7 };
struct carry {
	__u8 len;
	char bytes[CARRY_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct carry);
} carries SEC(".maps");

/* The write side's state of a connection: is it HTTP/1, or HTTP/2 and
 * where are its frames (below, with the HTTP/2 walk). */
enum conn_proto { CONN_NONE = 0, CONN_H1 = 1, CONN_H2 = 2 };

struct h2conn {
	__u32 skip; /* payload bytes of the current frame still to come */
	__u32 peer; /* the peer's address and port: a reused socket is a new connection */
	__u8 hlen;  /* bytes of a split frame header kept in hdr */
	__u8 proto; /* enum conn_proto */
	__u8 hdr[16];
	__u8 pad[2];
};

/* What the probe keeps per socket: in the socket's own storage for the
 * socket path's tp_btf programs, found from the trusted socket pointer
 * with a pointer hop and freed with the socket (a zero carry length or
 * CONN_NONE stands for nothing kept). The other programs (raw_tp,
 * tracepoint, and the syscall path's) see the socket as a number and key
 * carries and h2conns by it; on tp_btf that cost a bpf_probe_read_kernel
 * of the socket's address and a hash lookup on every send and receive.
 * The loader creates only the maps of the programs it loads. */
struct sock_state {
	struct h2conn conn;
	struct carry carry;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_state);
} sock_states SEC(".maps");

static __always_inline struct sock_state *sock_state(struct sock *sk, bool create)
{
	return bpf_sk_storage_get(&sock_states, sk, 0, create ? BPF_SK_STORAGE_GET_F_CREATE : 0);
}

/* The socket's carry, NULL when it has none: sk is the socket on tp_btf
 * (direct), key its address otherwise. */
static __always_inline struct carry *carry_get(struct sock *sk, __u64 key, const bool direct)
{
	if (!direct)
		return bpf_map_lookup_elem(&carries, &key);
	struct sock_state *st = sock_state(sk, false);
	return st && st->carry.len ? &st->carry : 0;
}

/* Drops the socket's carry, c when it was looked up already. */
static __always_inline void carry_drop(struct sock *sk, __u64 key, struct carry *c, const bool direct)
{
	if (!direct) {
		bpf_map_delete_elem(&carries, &key);
		return;
	}
	if (!c) {
		struct sock_state *st = sock_state(sk, false);
		c = st ? &st->carry : 0;
	}
	if (c)
		c->len = 0;
}

static __always_inline void carry_set(struct sock *sk, __u64 key, const struct carry *k, const bool direct)
{
	if (!direct) {
		bpf_map_update_elem(&carries, &key, k, BPF_ANY);
		return;
	}
	struct sock_state *st = sock_state(sk, true);
	if (st)
		st->carry = *k;
}

/* The request line being parsed: a carry, then the read's first bytes at a
 * variable offset (a map value, where older verifiers allow one). */
struct line_buf {
	char b[LINE_LEN + CARRY_MAX + 1];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct line_buf);
} line_scratch SEC(".maps");

/* HTTP/1 response starts, at slot * HTTPCOUNT_STATUSES + status: an
 * array (the loader sizes it for its ports), whose lookup the verifier
 * inlines where a per-CPU hash's was a helper call hashing the key, about
 * a sixth of a response's cost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HTTPCOUNT_STATUSES);
	__type(key, __u32);
	__type(value, __u64);
} responses SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct request_key);
	__type(value, __u64);
} requests SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HTTPCOUNT_LOST_REASONS);
	__type(key, enum httpcount_lost);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(enum httpcount_lost why)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &why);
	if (n)
		(*n)++;
}

/* The counted local port of sk when it is a TCP socket, -1 otherwise. */
static __always_inline int sk_port(struct sock *sk)
{
	if (!sk || BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP_)
		return -1;
	__u16 port = BPF_CORE_READ(sk, __sk_common.skc_num);
	if (!counted_port(port))
		return -1;
	return port;
}

/* The counted local port of fd when it is a TCP socket, -1 otherwise;
 * *skp is the socket. */
static __always_inline int socket_port(long fd, __u64 *skp)
{
	if (fd < 0)
		return -1;
	struct task_struct___httpcount *task = (void *)bpf_get_current_task();
	struct fdtable___httpcount *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || (__u64)fd >= BPF_CORE_READ(fdt, max_fds))
		return -1;
	struct file___httpcount **fds = BPF_CORE_READ(fdt, fd);
	struct file___httpcount *file = 0;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return -1;
	if ((BPF_CORE_READ(file, f_inode, i_mode) & S_IFMT_) != S_IFSOCK_)
		return -1;
	struct socket___httpcount *sock = BPF_CORE_READ(file, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);
	int port = sk_port(sk);
	if (port >= 0)
		*skp = (__u64)sk;
	return port;
}

/* The first buffer of a vectored call: iov[0].iov_base, and its length
 * in *len when len is not 0. */
static __always_inline __u64 first_iov(__u64 iov, __u32 *len)
{
	struct user_iovec v = {};
	if (!iov || bpf_probe_read_user(&v, sizeof(v), (void *)iov))
		return 0;
	if (len)
		*len = v.len > 0xffffffffULL ? 0xffffffff : (__u32)v.len;
	return v.base;
}

static __always_inline __u64 msg_first_iov(__u64 msg, __u32 *len)
{
	struct user_msghdr_head h = {};
	if (!msg || bpf_probe_read_user(&h, sizeof(h), (void *)msg))
		return 0;
	return first_iov(h.iov, len);
}

static __always_inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* One more count at i of a per-CPU array of counters. */
static __always_inline void count_at(void *map, __u32 i)
{
	__u64 *v = bpf_map_lookup_elem(map, &i);
	if (v)
		(*v)++;
}

/*
 * HTTP/2 without TLS (h2c, and gRPC over it). A server's bytes are frames,
 * each a 9-byte header (24-bit length, type, flags, reserved bit and 31-bit
 * stream id) and its payload. Every response ends exactly once with
 * END_STREAM (flag 0x1) on a DATA (type 0) or HEADERS (type 1) frame of a
 * client-initiated (odd) stream: those are counted. RST_STREAM ends a
 * stream without a response (a refused or cancelled request) and is not
 * counted; pushed responses (even streams) are not requests.
 *
 * Frames span writes, so each connection carries the bytes of the current
 * frame still to come before the next header (skip), or the first bytes of
 * a header a write split (hdr). A connection is recognised as HTTP/2 by the
 * server's first SETTINGS frame starting a write, or — for connections
 * older than the probe — by a write starting with a response HEADERS frame
 * (END_HEADERS, odd stream) or a PING/WINDOW_UPDATE/SETTINGS frame of the
 * connection. A connection that wrote an HTTP/1 response is never looked
 * at as HTTP/2 (until a 101 Switching Protocols).
 */
enum {
	H2_HEADER = 9,
	H2_MAX_FRAMES = 128, /* frames walked per write */
	H2_DATA = 0,
	H2_HEADERS = 1,
	H2_SETTINGS = 4,
	H2_PING = 6,
	H2_WINDOW_UPDATE = 8,
	H2_MAX_TYPE = 16, /* PRIORITY_UPDATE, the highest type registered */
	H2_END_STREAM = 0x1,
	H2_END_HEADERS = 0x4,
};

/* The connection states of the programs that see the socket as a number
 * (LRU: a socket closed without a last write leaves its entry to be
 * evicted). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct h2conn);
} h2conns SEC(".maps");

/* Where a connection's frames are walked: the global h2_walk takes only
 * numbers (older kernels refuse pointers into a global function), so the
 * state is copied here around the walk. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct h2conn);
} h2_scratch SEC(".maps");

/* A connection's state, NULL when it has none: sk is the socket on tp_btf
 * (direct), key its address otherwise. */
static __always_inline struct h2conn *conn_get(struct sock *sk, __u64 key, const bool direct)
{
	if (!direct)
		return bpf_map_lookup_elem(&h2conns, &key);
	struct sock_state *st = sock_state(sk, false);
	return st && st->conn.proto != CONN_NONE ? &st->conn : 0;
}

static __always_inline void conn_forget(struct h2conn *c, __u64 key, const bool direct)
{
	if (direct)
		c->proto = CONN_NONE;
	else
		bpf_map_delete_elem(&h2conns, &key);
}

/* Sets a connection's state to *init; NULL when it could not be kept. */
static __always_inline struct h2conn *conn_set(struct sock *sk, __u64 key, const struct h2conn *init, const bool direct)
{
	if (!direct) {
		if (bpf_map_update_elem(&h2conns, &key, init, BPF_ANY))
			return 0;
		return bpf_map_lookup_elem(&h2conns, &key);
	}
	struct sock_state *st = sock_state(sk, true);
	if (!st)
		return 0;
	st->conn = *init;
	return &st->conn;
}

/* HTTP/2 responses ended, by port slot (sized by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} h2_responses SEC(".maps");

struct sock_common___httpcount {
	__u32 skc_daddr;
	__u16 skc_dport;
} __attribute__((preserve_access_index));

struct sock___httpcount {
	struct sock_common___httpcount __sk_common;
} __attribute__((preserve_access_index));

static __always_inline __u32 peer_of(__u64 sk)
{
	struct sock___httpcount *s = (void *)sk;
	return BPF_CORE_READ(s, __sk_common.skc_daddr) ^ ((__u32)BPF_CORE_READ(s, __sk_common.skc_dport) << 16);
}

struct h2frame {
	__u32 len;
	__u32 stream;
	__u8 type;
	__u8 flags;
	bool reserved;
};

static __always_inline struct h2frame h2_parse(const __u8 *h)
{
	struct h2frame f = {
		.len = ((__u32)h[0] << 16) | ((__u32)h[1] << 8) | h[2],
		.type = h[3],
		.flags = h[4],
		.reserved = (h[5] & 0x80) != 0,
		.stream = ((__u32)(h[5] & 0x7f) << 24) | ((__u32)h[6] << 16) | ((__u32)h[7] << 8) | h[8],
	};
	return f;
}

/* A frame a server's write can start with on an HTTP/2 connection seen
 * for the first time. */
static __always_inline bool h2_first(struct h2frame f)
{
	if (f.reserved)
		return false;
	if (f.type == H2_SETTINGS)
		return f.stream == 0 && ((f.flags == 0 && f.len % 6 == 0 && f.len <= 6 * 16) || (f.flags == 1 && f.len == 0));
	if (f.type == H2_HEADERS)
		return (f.stream & 1) && (f.flags & H2_END_HEADERS) && !(f.flags & ~0x2d) && f.len > 0 && f.len <= 16384;
	if (f.type == H2_PING)
		return f.stream == 0 && f.len == 8 && f.flags <= 1;
	if (f.type == H2_WINDOW_UPDATE)
		return f.len == 4 && f.flags == 0;
	return false;
}

/* Counts a frame; false when it cannot be a frame (the walk lost its
 * place). */
static __always_inline bool h2_frame(struct h2frame f, __u32 slot)
{
	if (f.reserved || f.type > H2_MAX_TYPE || ((f.type == H2_DATA || f.type == H2_HEADERS) && f.stream == 0))
		return false;
	if ((f.type == H2_DATA || f.type == H2_HEADERS) && (f.flags & H2_END_STREAM) && (f.stream & 1))
		count_at(&h2_responses, slot);
	return true;
}

/* Walks the frames of n bytes written at buf, from the state in h2_scratch,
 * and leaves it there for the next write; 0 when the walk lost its place
 * (counted). A global function: the verifier checks it once, on its own,
 * rather than inlined into each hook with the hook's state (the frame walk
 * is most of the program; inlined into the socket path's send hook it went
 * over the verifier's million instructions). */
__attribute__((noinline)) int h2_walk(__u32 slot, __u64 buf, __u64 n)
{
	__u32 zero = 0;
	struct h2conn *c = bpf_map_lookup_elem(&h2_scratch, &zero);
	if (!c)
		return 0;
	__u64 pos = c->skip;
	__u32 hlen = c->hlen;
	if (hlen > 0) {
		/* A header split by the previous write: its rest starts here. */
		hlen &= 7;
		__u32 need = H2_HEADER - hlen;
		if (n < need) {
			__u32 m = (__u32)n & 7;
			if (m && bpf_probe_read_user(c->hdr + hlen, m, (void *)buf))
				goto lost;
			c->hlen = hlen + m;
			return 1;
		}
		if (bpf_probe_read_user(c->hdr + hlen, need & 15, (void *)buf))
			goto lost;
		struct h2frame f = h2_parse(c->hdr);
		if (!h2_frame(f, slot))
			goto lost;
		pos = need + f.len;
		c->hlen = 0;
	}
	for (int i = 0; i < H2_MAX_FRAMES; i++) {
		if (pos >= n) {
			c->skip = pos - n;
			c->hlen = 0;
			return 1;
		}
		if (pos + H2_HEADER > n) {
			/* The write ends inside a header: keep its first bytes. */
			__u32 m = (__u32)(n - pos) & 7;
			if (m && bpf_probe_read_user(c->hdr, m, (void *)(buf + pos)))
				goto lost;
			c->skip = 0;
			c->hlen = m;
			return 1;
		}
		__u8 h[H2_HEADER];
		if (bpf_probe_read_user(h, sizeof(h), (void *)(buf + pos)))
			goto lost;
		struct h2frame f = h2_parse(h);
		if (!h2_frame(f, slot))
			goto lost;
		pos += H2_HEADER + (__u64)f.len;
	}
	if (pos >= n) {
		c->skip = pos - n;
		c->hlen = 0;
		return 1;
	}
lost:
	count_lost(HTTPCOUNT_LOST_H2_UNPARSED);
	return 0;
}

/* Walks a write's frames on connection c; where the next frame starts is
 * unknown when the walk lost its place, and the connection is forgotten
 * until a write starts at a frame again. */
static __always_inline void h2_write(struct h2conn *c, __u64 key, __u32 slot, __u64 buf, __u64 n, const bool direct)
{
	__u32 zero = 0;
	struct h2conn *w = bpf_map_lookup_elem(&h2_scratch, &zero);
	if (!w)
		return;
	*w = *c;
	if (h2_walk(slot, buf, n))
		*c = *w;
	else
		conn_forget(c, key, direct);
}

static __always_inline bool is_http1(const char *h)
{
	return h[0] == 'H' && h[1] == 'T' && h[2] == 'T' && h[3] == 'P' && h[4] == '/' && h[5] == '1' && h[6] == '.';
}

/* written bytes a process wrote on a counted socket, of which the first
 * len are at buf (the rest in a vectored write's later iovecs): an HTTP/1
 * response start, or HTTP/2 frames. The socket is sk on tp_btf (direct),
 * key otherwise. */
static __always_inline void on_written(__u16 port, struct sock *sk, __u64 key, __u32 peer, __u64 buf, __u64 written, __u32 len,
				       const bool direct)
{
	int slot = port_slot(port);
	__u64 n = written < len ? written : len;
	struct h2conn *c = 0;
	char head[12] = {};
	if (slot < 0 || n == 0 || bpf_probe_read_user(head, n < sizeof(head) ? (n & 15) : sizeof(head), (void *)buf))
		goto past;
	c = conn_get(sk, key, direct);
	if (c && c->peer != peer) {
		conn_forget(c, key, direct);
		c = 0;
	}
	if (c && c->proto == CONN_H2) {
		h2_write(c, key, slot, buf, n, direct);
		goto past;
	}
	if (is_http1(head)) {
		__u32 status = 0;
		if (head[8] == ' ' && is_digit(head[9]) && is_digit(head[10]) && is_digit(head[11]))
			status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
		if (status >= HTTPCOUNT_STATUSES)
			status = 0;
		count_at(&responses, (__u32)slot * HTTPCOUNT_STATUSES + status);
		if (status == 101) {
			/* Switching protocols (to h2c): the next write may be HTTP/2. */
			if (c)
				conn_forget(c, key, direct);
		} else if (!c) {
			struct h2conn h1 = { .peer = peer, .proto = CONN_H1 };
			conn_set(sk, key, &h1, direct);
		}
		goto past;
	}
	if (c)
		goto past; /* an HTTP/1 connection's body, or a later write */
	if (n < H2_HEADER || !h2_first(h2_parse((const __u8 *)head))) {
		/* A connection of unknown protocol: opened before the probe and
		 * first seen mid-stream (an HTTP/2 DATA frame, an HTTP/1 body),
		 * or not HTTP. Its responses are not counted until a write
		 * starts one: said, not silent. */
		count_lost(HTTPCOUNT_LOST_UNRECOGNIZED);
		goto past;
	}
	struct h2conn fresh = { .peer = peer, .proto = CONN_H2 };
	c = conn_set(sk, key, &fresh, direct);
	if (c)
		h2_write(c, key, slot, buf, n, direct);
	else
		count_lost(HTTPCOUNT_LOST_H2_UNPARSED);
past:
	if (written > n) {
		/* The frames of an HTTP/2 connection continued past the
		 * buffer the probe sees (a vectored write's first iovec):
		 * where the next frame starts is unknown, so the connection is
		 * forgotten until a write starts at a frame again, and the
		 * write is counted as not parsed. */
		c = conn_get(sk, key, direct);
		if (c && c->proto == CONN_H2) {
			count_lost(HTTPCOUNT_LOST_H2_UNPARSED);
			conn_forget(c, key, direct);
		}
	}
}

/* A write on a counted socket is remembered at entry (the buffer) and
 * looked at on exit, when the bytes it wrote are known. */
static __always_inline int on_write(__u64 pid_tgid, long fd, __u64 buf, __u32 len)
{
	if (!buf)
		return 0;
	__u64 sk = 0;
	int port = socket_port(fd, &sk);
	if (port < 0)
		return 0;
	struct inflight in = { .kind = KIND_RESPONSE, .port = port, .buf = buf, .sk = sk, .len = len };
	if (bpf_map_update_elem(&inflight, &pid_tgid, &in, BPF_ANY))
		count_lost(HTTPCOUNT_LOST_INFLIGHT);
	return 0;
}

static __always_inline int on_read(__u64 pid_tgid, long fd, __u64 buf)
{
	if (!buf)
		return 0;
	__u64 sk = 0;
	int port = socket_port(fd, &sk);
	if (port < 0)
		return 0;
	struct inflight in = { .kind = KIND_REQUEST, .port = port, .buf = buf, .sk = sk };
	if (bpf_map_update_elem(&inflight, &pid_tgid, &in, BPF_ANY))
		count_lost(HTTPCOUNT_LOST_INFLIGHT);
	return 0;
}

static __always_inline int on_enter(long id, __u64 a0, __u64 a1)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 len = 0xffffffff;
	if (id == nr_write || id == nr_sendto)
		return on_write(pid_tgid, (long)a0, a1, len);
	if (id == nr_writev) {
		__u64 buf = first_iov(a1, &len);
		return on_write(pid_tgid, (long)a0, buf, len);
	}
	if (id == nr_sendmsg) {
		__u64 buf = msg_first_iov(a1, &len);
		return on_write(pid_tgid, (long)a0, buf, len);
	}
	if (!count_requests)
		return 0;
	if (id == nr_read || id == nr_recvfrom)
		return on_read(pid_tgid, (long)a0, a1);
	if (id == nr_readv)
		return on_read(pid_tgid, (long)a0, first_iov(a1, 0));
	if (id == nr_recvmsg)
		return on_read(pid_tgid, (long)a0, msg_first_iov(a1, 0));
	return 0;
}

static __always_inline bool watched(long id)
{
	return id == nr_write || id == nr_writev || id == nr_sendto || id == nr_sendmsg ||
	       (count_requests && (id == nr_read || id == nr_readv || id == nr_recvfrom || id == nr_recvmsg));
}

/* Method length including its space; 0 when the line starts with none. */
static __always_inline int method_of(const char *l, enum http_method *m)
{
	if (l[0] == 'G' && l[1] == 'E' && l[2] == 'T' && l[3] == ' ') { *m = HTTP_GET; return 4; }
	if (l[0] == 'P' && l[1] == 'O' && l[2] == 'S' && l[3] == 'T' && l[4] == ' ') { *m = HTTP_POST; return 5; }
	if (l[0] == 'P' && l[1] == 'U' && l[2] == 'T' && l[3] == ' ') { *m = HTTP_PUT; return 4; }
	if (l[0] == 'D' && l[1] == 'E' && l[2] == 'L' && l[3] == 'E' && l[4] == 'T' && l[5] == 'E' && l[6] == ' ') { *m = HTTP_DELETE; return 7; }
	if (l[0] == 'P' && l[1] == 'A' && l[2] == 'T' && l[3] == 'C' && l[4] == 'H' && l[5] == ' ') { *m = HTTP_PATCH; return 6; }
	if (l[0] == 'H' && l[1] == 'E' && l[2] == 'A' && l[3] == 'D' && l[4] == ' ') { *m = HTTP_HEAD; return 5; }
	if (l[0] == 'O' && l[1] == 'P' && l[2] == 'T' && l[3] == 'I' && l[4] == 'O' && l[5] == 'N' && l[6] == 'S' && l[7] == ' ') { *m = HTTP_OPTIONS; return 8; }
	return 0;
}

static __always_inline bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }

/* A read of ret bytes at buf on a counted socket: sk on tp_btf (direct),
 * key otherwise. */
static __always_inline void count_request(__u16 port, struct sock *sk, __u64 key, __u64 buf, long ret, const bool direct)
{
	__u32 zero = 0;
	struct line_buf *lb = bpf_map_lookup_elem(&line_scratch, &zero);
	if (!lb)
		return;
	char *line = lb->b;
	__builtin_memset(line, 0, sizeof(lb->b));
	/* The bytes a previous short read left for this one. */
	__u32 clen = 0;
	struct carry *c = carry_get(sk, key, direct);
	if (c) {
		clen = c->len;
		if (clen > CARRY_MAX)
			clen = CARRY_MAX;
		for (int i = 0; i < CARRY_MAX; i++)
			line[i] = i < clen ? c->bytes[i] : 0;
		carry_drop(sk, key, c, direct);
	}
	if (clen == 0 && ret < 8) {
		/* Shorter than "OPTIONS ": perhaps a request's first bytes (an
		 * upper-case method letter), kept for the socket's next read. */
		struct carry k = { .len = (__u8)ret };
		if (bpf_probe_read_user(k.bytes, 1, (void *)buf) || !is_upper(k.bytes[0]))
			return;
		__u32 n = (__u32)ret & 7;
		if (n > CARRY_MAX)
			n = CARRY_MAX;
		if (n > 1 && bpf_probe_read_user(k.bytes, n, (void *)buf))
			return;
		carry_set(sk, key, &k, direct);
		return;
	}
	if (clen + ret < 14) /* "GET / HTTP/1.1" is the shortest request line */
		return;
	clen &= CARRY_MAX;
	/* Bytes past ret are the rest of the reader's buffer, harmless: the
	 * target ends at the line's first space. Only when the buffer ends
	 * within LINE_LEN bytes of its start does the full read fault; then
	 * exactly ret bytes are read. */
	if (bpf_probe_read_user(line + clen, LINE_LEN, (void *)buf)) {
		__u32 n = (__u32)ret & 127;
		if (n > LINE_LEN)
			n = LINE_LEN;
		if (n < 1 || bpf_probe_read_user(line + clen, n, (void *)buf)) {
			count_lost(HTTPCOUNT_LOST_READ);
			return;
		}
	}
	struct request_key req;
	__builtin_memset(&req, 0, sizeof(req));
	int start = method_of(line, &req.method);
	if (!start || line[start] != '/')
		return;
	req.port = port;
	/* Digits become '#' one for one (user space folds runs): keeping the
	 * output index equal to the input index keeps the verifier's state
	 * count linear in the path length. */
	bool ended = false;
	for (int i = 0; i < HTTPCOUNT_TARGET_LEN; i++) {
		int at = start + i;
		if (at >= LINE_LEN)
			break;
		char c = line[at];
		if (c == ' ' || c == '?' || c == '#' || c == '\r' || c == '\n' || c == 0) {
			ended = true;
			break;
		}
		req.target[i] = is_digit(c) ? '#' : c;
	}
	if (!ended)
		req.truncated = 1;
	__u64 *v = bpf_map_lookup_elem(&requests, &req);
	if (v) {
		(*v)++;
		return;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&requests, &req, &one, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(&requests, &req);
	if (v)
		(*v)++;
	else
		count_lost(HTTPCOUNT_LOST_REQUEST);
}

static __always_inline int on_exit(long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct inflight *p = bpf_map_lookup_elem(&inflight, &pid_tgid);
	if (!p)
		return 0;
	struct inflight in = *p;
	bpf_map_delete_elem(&inflight, &pid_tgid);
	if (in.kind == KIND_REQUEST && ret == 0) {
		/* The peer closed: nothing continues a carry. */
		carry_drop(0, in.sk, 0, false);
		return 0;
	}
	if (ret <= 0)
		return 0;
	if (in.kind == KIND_REQUEST) {
		count_request(in.port, 0, in.sk, in.buf, ret, false);
		return 0;
	}
	on_written(in.port, 0, in.sk, peer_of(in.sk), in.buf, (__u64)ret, in.len, false);
	return 0;
}

static __always_inline bool ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

static __always_inline int btf_enter(struct pt_regs___httpcount *regs, long id)
{
	if (!ours() || !watched(id))
		return 0;
	return on_enter(id, regs->di, regs->si);
}
SEC("tp_btf/sys_enter")
int BPF_PROG(btf_sys_enter, struct pt_regs___httpcount *regs, long id)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SYS_ENTER, btf_enter(regs, id)); }

static __always_inline int raw_sys_enter_body(struct bpf_raw_tracepoint_args *ctx)
{
	if (!ours())
		return 0;
	long id = (long)ctx->args[1];
	if (!watched(id))
		return 0;
	struct pt_regs___httpcount *regs = (void *)ctx->args[0];
	return on_enter(id, BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si));
}
SEC("raw_tp/sys_enter")
int raw_sys_enter(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(HTTPCOUNT_HOOK_SYS_ENTER, raw_sys_enter_body(ctx)); }

static __always_inline int tp_sys_enter_body(struct trace_event_raw_sys_enter___httpcount *ctx)
{
	if (!ours())
		return 0;
	long id = ctx->id;
	if (!watched(id))
		return 0;
	return on_enter(id, ctx->args[0], ctx->args[1]);
}
SEC("tracepoint/raw_syscalls/sys_enter")
int tp_sys_enter(struct trace_event_raw_sys_enter___httpcount *ctx) { return SELF_COSTED(HTTPCOUNT_HOOK_SYS_ENTER, tp_sys_enter_body(ctx)); }

/* The exit of a syscall this probe does not watch (the JVM's futex and
 * epoll calls are most of them) returns before the inflight lookup. */
static __always_inline int btf_exit(struct pt_regs___httpcount *regs, long ret)
{
	if (!ours() || !watched((long)regs->orig_ax))
		return 0;
	return on_exit(ret);
}
SEC("tp_btf/sys_exit")
int BPF_PROG(btf_sys_exit, struct pt_regs___httpcount *regs, long ret)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SYS_EXIT, btf_exit(regs, ret)); }

static __always_inline int raw_sys_exit_body(struct bpf_raw_tracepoint_args *ctx)
{
	if (!ours())
		return 0;
	struct pt_regs___httpcount *regs = (void *)ctx->args[0];
	if (!watched((long)BPF_CORE_READ(regs, orig_ax)))
		return 0;
	return on_exit((long)ctx->args[1]);
}
SEC("raw_tp/sys_exit")
int raw_sys_exit(struct bpf_raw_tracepoint_args *ctx) { return SELF_COSTED(HTTPCOUNT_HOOK_SYS_EXIT, raw_sys_exit_body(ctx)); }

static __always_inline int tp_sys_exit_body(struct trace_event_raw_sys_exit___httpcount *ctx)
{
	if (!ours() || !watched(ctx->id))
		return 0;
	return on_exit(ctx->ret);
}
SEC("tracepoint/raw_syscalls/sys_exit")
int tp_sys_exit(struct trace_event_raw_sys_exit___httpcount *ctx) { return SELF_COSTED(HTTPCOUNT_HOOK_SYS_EXIT, tp_sys_exit_body(ctx)); }

/* The socket path: one program run per socket send or receive, after it. */

/* The user buffer of the syscall the current task is in, read from its
 * saved user registers: the buffer of write/sendto/read/recvfrom, the
 * first of writev/readv/sendmsg/recvmsg; 0 for any other way in (sendfile,
 * io_uring, a kernel socket), which is not looked at, as on the syscall
 * path. */
static __always_inline __u64 buf_of(long id, __u64 a1, bool send, __u32 *len)
{
	if (send) {
		if (id == nr_write || id == nr_sendto)
			return a1;
		if (id == nr_writev)
			return first_iov(a1, len);
		if (id == nr_sendmsg)
			return msg_first_iov(a1, len);
		return 0;
	}
	if (id == nr_read || id == nr_recvfrom)
		return a1;
	if (id == nr_readv)
		return first_iov(a1, 0);
	if (id == nr_recvmsg)
		return msg_first_iov(a1, 0);
	return 0;
}

static __always_inline __u64 syscall_buf(bool send, __u32 *len)
{
	struct pt_regs___httpcount *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return 0;
	return buf_of(BPF_CORE_READ(regs, orig_ax), BPF_CORE_READ(regs, si), send, len);
}

/* A send that wrote something (ret > 0): an HTTP/1 response start or
 * HTTP/2 frames, the same rules as the syscall path's entry/exit pair. */
static __always_inline int sock_send(struct sock *sk, int ret)
{
	if (!ours() || ret <= 0)
		return 0;
	int port = sk_port(sk);
	if (port < 0)
		return 0;
	__u32 len = 0xffffffff;
	__u64 buf = syscall_buf(true, &len);
	if (!buf)
		return 0;
	on_written(port, 0, (__u64)sk, peer_of((__u64)sk), buf, (__u64)ret, len, false);
	return 0;
}

/* A receive that returned bytes into the buffer; a peek consumes nothing
 * and is left alone (the data is read again). */
static __always_inline int sock_recv(struct sock *sk, int ret, int flags)
{
	if (!ours() || !count_requests || (flags & MSG_PEEK_))
		return 0;
	int port = sk_port(sk);
	if (port < 0)
		return 0;
	__u64 key = (__u64)sk;
	if (ret == 0) {
		/* The peer closed: nothing continues a carry. */
		carry_drop(0, key, 0, false);
		return 0;
	}
	if (ret < 0)
		return 0;
	__u64 buf = syscall_buf(false, 0);
	if (!buf)
		return 0;
	count_request(port, 0, key, buf, ret, false);
	return 0;
}

/* The current task on tp_btf when it is a thread of the target process,
 * else NULL: a trusted pointer, whose tgid is a plain load and which
 * bpf_task_pt_regs takes for the saved registers (bpf_get_current_pid_tgid
 * was a helper call of its own). */
static __always_inline struct task_struct *btf_our_task(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	return ((struct task_struct___httpcount *)task)->tgid == target_tgid ? task : 0;
}

/* sock_send on tp_btf: the socket, the task and its saved registers are
 * typed kernel pointers, read with plain loads where the other attach
 * methods call bpf_probe_read_kernel once per field (six calls a
 * response), and the connection's state is the socket's own storage. The
 * cheapest rejections come first: another process's send costs a helper
 * call and a load. */
static __always_inline int btf_sock_send(struct sock *sk, int ret)
{
	struct task_struct *task = btf_our_task();
	if (!task || ret <= 0 || !sk || sk->sk_protocol != IPPROTO_TCP_)
		return 0;
	__u16 port = sk->__sk_common.skc_num;
	if (!counted_port(port))
		return 0;
	struct pt_regs___httpcount *regs = (void *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	__u32 len = 0xffffffff;
	__u64 buf = buf_of(regs->orig_ax, regs->si, true, &len);
	if (!buf)
		return 0;
	struct sock___httpcount *s = (void *)sk;
	__u32 peer = s->__sk_common.skc_daddr ^ ((__u32)s->__sk_common.skc_dport << 16);
	on_written(port, sk, 0, peer, buf, (__u64)ret, len, true);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(btf_sock_send_length, struct sock *sk, int ret)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_SEND, btf_sock_send(sk, ret)); }

SEC("raw_tp/sock_send_length")
int raw_sock_send_length(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_SEND, sock_send((struct sock *)ctx->args[0], (int)ctx->args[1])); }

SEC("tracepoint/sock/sock_send_length")
int tp_sock_send_length(struct trace_event_raw_sock_msg_length___httpcount *ctx)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_SEND, sock_send((struct sock *)ctx->sk, ctx->ret)); }

/* sock_recv on tp_btf, read as btf_sock_send reads, the carry in the
 * socket's storage. */
static __always_inline int btf_sock_recv(struct sock *sk, int ret, int flags)
{
	struct task_struct *task = btf_our_task();
	if (!task || !count_requests || (flags & MSG_PEEK_) || !sk || sk->sk_protocol != IPPROTO_TCP_)
		return 0;
	__u16 port = sk->__sk_common.skc_num;
	if (!counted_port(port))
		return 0;
	if (ret == 0) {
		/* The peer closed: nothing continues a carry. */
		carry_drop(sk, 0, 0, true);
		return 0;
	}
	if (ret < 0)
		return 0;
	struct pt_regs___httpcount *regs = (void *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	__u64 buf = buf_of(regs->orig_ax, regs->si, false, 0);
	if (!buf)
		return 0;
	count_request(port, sk, 0, buf, ret, true);
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(btf_sock_recv_length, struct sock *sk, int ret, int flags)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_RECV, btf_sock_recv(sk, ret, flags)); }

SEC("raw_tp/sock_recv_length")
int raw_sock_recv_length(struct bpf_raw_tracepoint_args *ctx)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_RECV, sock_recv((struct sock *)ctx->args[0], (int)ctx->args[1], (int)ctx->args[2])); }

SEC("tracepoint/sock/sock_recv_length")
int tp_sock_recv_length(struct trace_event_raw_sock_msg_length___httpcount *ctx)
{ return SELF_COSTED(HTTPCOUNT_HOOK_SOCK_RECV, sock_recv((struct sock *)ctx->sk, ctx->ret, ctx->flags)); }
