/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * kernel.h: the kernel types perfscope's BPF programs use, written by hand.
 *
 * Only the types and fields the probes read are declared. Structs that mirror
 * kernel structures carry preserve_access_index so that clang emits CO-RE
 * relocations: the loader fixes field offsets from the running kernel's BTF,
 * so one object works across kernel builds. A full vmlinux.h would tie the
 * committed objects to the BTF of the machine that generated them and make
 * the generated files non-reproducible.
 */
#ifndef PERFSCOPE_KERNEL_H
#define PERFSCOPE_KERNEL_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
enum { false = 0, true = 1 };

/* The subset of the BPF UAPI that bpf_helpers.h and our maps need. */
enum bpf_map_type {
	BPF_MAP_TYPE_UNSPEC = 0,
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PROG_ARRAY = 3,
	BPF_MAP_TYPE_PERF_EVENT_ARRAY = 4,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_STACK_TRACE = 7,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_LRU_PERCPU_HASH = 10,
	BPF_MAP_TYPE_SK_STORAGE = 24,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_LOCK = 4,
};

/* Map flags; local storage maps must not preallocate. */
enum {
	BPF_F_NO_PREALLOC = (1U << 0),
};

/* Flags for bpf_sk_storage_get. */
enum {
	BPF_SK_STORAGE_GET_F_CREATE = (1ULL << 0),
};

/* Flags for bpf_get_stackid. */
enum {
	BPF_F_SKIP_FIELD_MASK = 0xff,
	BPF_F_USER_STACK = (1ULL << 8),
	BPF_F_FAST_STACK_CMP = (1ULL << 9),
	BPF_F_REUSE_STACKID = (1ULL << 10),
};

/* Softirq vectors, as in include/linux/interrupt.h. Stable kernel ABI: the
 * order is printed by /proc/softirqs. */
enum softirq_vec {
	HI_SOFTIRQ = 0,
	TIMER_SOFTIRQ,
	NET_TX_SOFTIRQ,
	NET_RX_SOFTIRQ,
	BLOCK_SOFTIRQ,
	IRQ_POLL_SOFTIRQ,
	TASKLET_SOFTIRQ,
	SCHED_SOFTIRQ,
	HRTIMER_SOFTIRQ,
	RCU_SOFTIRQ,
	NR_SOFTIRQS
};

/* Context of raw_tp programs: the tracepoint's arguments as u64. */
struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

/* Common header of every classic tracepoint record. */
struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
} __attribute__((preserve_access_index));

/* irq:softirq_entry / softirq_exit / softirq_raise record. */
struct trace_event_raw_softirq {
	struct trace_entry ent;
	unsigned int vec;
} __attribute__((preserve_access_index));

/* ---- Networking (netqueue, lockstat, udpdrop). Only the fields read. ---- */

/* A network namespace is named by the inode of /proc/PID/ns/net: ns.inum. */
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

/* The kernel's possible_net_t is an anonymous struct; CO-RE matches members
 * by name, so a named local struct works. */
struct possible_net {
	struct net *net;
} __attribute__((preserve_access_index));
typedef struct possible_net possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct netdev_queue;

struct napi_struct {
	struct net_device *dev;
	unsigned int napi_id;
} __attribute__((preserve_access_index));

struct sock_common {
	__u16 skc_num; /* local port, host order */
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

/* A socket's inode number (what /proc/net/udp and /proc/PID/fd show) is its
 * file's inode: sk->sk_socket->file->f_inode->i_ino. */
struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct socket {
	struct file *file;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
	struct socket *sk_socket;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	struct sock *sk;
	unsigned int len;
	__u16 queue_mapping;
	/* Set by GRO (skb_mark_napi_id) to the NAPI instance that received the
	 * packet; absent without CONFIG_NET_RX_BUSY_POLL. */
	unsigned int napi_id;
	/* The packet's headers: offsets from head, ~0 while unset. */
	unsigned char *head;
	__u16 transport_header;
	__u16 network_header;
	__u16 protocol; /* ETH_P_*, network order */
} __attribute__((preserve_access_index));

struct Qdisc;

/* napi:napi_poll record. */
struct trace_event_raw_napi_poll {
	struct trace_entry ent;
	struct napi_struct *napi;
	__u32 __data_loc_dev_name;
	int work;
	int budget;
} __attribute__((preserve_access_index));

/* net:netif_receive_skb record (net_dev_template). */
struct trace_event_raw_net_dev_template {
	struct trace_entry ent;
	void *skbaddr;
	unsigned int len;
} __attribute__((preserve_access_index));

/* net:net_dev_start_xmit record. */
struct trace_event_raw_net_dev_start_xmit {
	struct trace_entry ent;
	__u16 queue_mapping;
	const void *skbaddr;
	unsigned int len;
} __attribute__((preserve_access_index));

/* qdisc:qdisc_enqueue record (5.x+). */
struct trace_event_raw_qdisc_enqueue {
	struct trace_entry ent;
	struct Qdisc *qdisc;
	const struct netdev_queue *txq;
	void *skbaddr;
	int ifindex;
	__u32 handle;
	__u32 parent;
} __attribute__((preserve_access_index));

/* qdisc:qdisc_dequeue record. */
struct trace_event_raw_qdisc_dequeue {
	struct trace_entry ent;
	struct Qdisc *qdisc;
	const struct netdev_queue *txq;
	int packets;
	void *skbaddr;
	int ifindex;
	__u32 handle;
	__u32 parent;
} __attribute__((preserve_access_index));

/* lock:contention_begin / contention_end records (5.19+). */
struct trace_event_raw_contention_begin {
	struct trace_entry ent;
	void *lock_addr;
	unsigned int flags;
} __attribute__((preserve_access_index));

struct trace_event_raw_contention_end {
	struct trace_entry ent;
	void *lock_addr;
	int ret;
} __attribute__((preserve_access_index));

/* udp:udp_fail_queue_rcv_skb record. Since 6.10 it carries the datagram's
 * ports and family; before, only the socket's local port (lport). */
struct trace_event_raw_udp_fail_queue_rcv_skb {
	struct trace_entry ent;
	int rc;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 lport;
} __attribute__((preserve_access_index));

/* Values are read from kernel BTF in user space, never compiled in; the
 * type only has to be an enum for the CO-RE field match. */
enum skb_drop_reason { SKB_DROP_REASON__PERFSCOPE_UNUSED = 0 };

/* skb:kfree_skb record. rx_sk appeared in 6.12, reason in 5.17. */
struct trace_event_raw_kfree_skb {
	struct trace_entry ent;
	void *skbaddr;
	void *location;
	void *rx_sk;
	unsigned short protocol;
	enum skb_drop_reason reason;
} __attribute__((preserve_access_index));

/* sock:sock_recv_length record (6.6+; event class sock_msg_length). */
struct trace_event_raw_sock_msg_length {
	struct trace_entry ent;
	void *sk;
	__u16 family;
	__u16 protocol;
	int ret;
	int flags;
} __attribute__((preserve_access_index));

/* sock:sk_data_ready record (6.7+). */
struct trace_event_raw_sk_data_ready {
	struct trace_entry ent;
	const void *skaddr;
	__u16 family;
	__u16 protocol;
	unsigned long ip;
} __attribute__((preserve_access_index));

#endif /* PERFSCOPE_KERNEL_H */
