/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The socket structures lockstat reads to find which socket a contended lock
 * belongs to. Only the members read are declared; preserve_access_index
 * makes every access a CO-RE relocation against the running kernel's BTF.
 *
 * The names carry the "___lockstat" flavour suffix, which CO-RE ignores when
 * matching (struct sock___lockstat is the kernel's struct sock): declaring
 * more members of struct sock in the shared kernel.h would change the BTF,
 * hence the committed objects, of every probe that includes it.
 */
#ifndef PERFSCOPE_LOCKSTAT_SOCK_H
#define PERFSCOPE_LOCKSTAT_SOCK_H

/* Only offsets of locks are taken, never their contents: any struct
 * matches the kernel's spinlock_t for that. */
struct spinlock___lockstat {
	int _unused;
} __attribute__((preserve_access_index));

struct sk_buff_head___lockstat {
	struct spinlock___lockstat lock;
} __attribute__((preserve_access_index));

struct wait_queue_head___lockstat {
	struct spinlock___lockstat lock;
} __attribute__((preserve_access_index));

struct socket_lock___lockstat {
	struct spinlock___lockstat slock;
	int owned; /* a process holds the socket (lock_sock) */
} __attribute__((preserve_access_index));

struct ns_common___lockstat {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net___lockstat {
	struct ns_common___lockstat ns;
} __attribute__((preserve_access_index));

struct possible_net___lockstat {
	struct net___lockstat *net;
} __attribute__((preserve_access_index));

struct sock_common___lockstat {
	__u16 skc_num; /* local port, host order */
	unsigned short skc_family;
	struct possible_net___lockstat skc_net; /* empty without CONFIG_NET_NS */
} __attribute__((preserve_access_index));

struct socket___lockstat;

struct sock___lockstat {
	struct sock_common___lockstat __sk_common;
	struct sk_buff_head___lockstat sk_receive_queue;
	struct socket_lock___lockstat sk_lock;
	struct socket___lockstat *sk_socket;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

/* struct udp_sock starts with struct sock (through inet_sock). */
struct udp_sock___lockstat {
	struct sk_buff_head___lockstat reader_queue; /* 4.13+ */
} __attribute__((preserve_access_index));

/* sock_def_readable wakes the reader through sk->sk_wq, which for a socket
 * with a file is &socket->wq, embedded since 5.3. */
struct socket_wq___lockstat {
	struct wait_queue_head___lockstat wait;
} __attribute__((preserve_access_index));

struct socket___lockstat {
	struct sock___lockstat *sk;
	struct socket_wq___lockstat wq;
} __attribute__((preserve_access_index));

struct inode___lockstat {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

/* SOCK_INODE(): a socket with a file is allocated together with its inode. */
struct socket_alloc___lockstat {
	struct socket___lockstat socket;
	struct inode___lockstat vfs_inode;
} __attribute__((preserve_access_index));

#endif
