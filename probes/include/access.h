/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * access.h: reading kernel fields at the lowest cost each attach method
 * allows, and the socket filter the UDP probes share.
 *
 * In tp_btf programs the tracepoint's arguments are BTF-typed pointers: a
 * plain load through them (skb->len) is checked by the verifier against
 * kernel BTF and run as a fault-safe PROBE_MEM load, a single instruction.
 * raw_tp and classic tracepoint programs see the same pointers as plain
 * integers and must copy each field with bpf_probe_read_kernel, a helper
 * call per field (~20-30 ns each on our VM). Handlers take a `direct` flag
 * that is a constant in every caller, so after inlining the compiler keeps
 * only one of the two branches of READ().
 */
#ifndef PERFSCOPE_ACCESS_H
#define PERFSCOPE_ACCESS_H

#include <bpf/bpf_core_read.h>

#define READ(direct, p, field) ((direct) ? (p)->field : BPF_CORE_READ(p, field))

enum { PERFSCOPE_IPPROTO_UDP = 17 };

/* udp_port_in for a socket already known to be UDP: its protocol is not
 * read again. */
static __always_inline int udp_local_port_in(const struct sock *sk, __u32 netns, __u16 port, const bool direct)
{
	__u16 local = READ(direct, sk, __sk_common.skc_num);
	if (port && local != port)
		return -1;
	struct net *net = READ(direct, sk, __sk_common.skc_net.net);
	if (READ(direct, net, ns.inum) != netns)
		return -1;
	return local;
}

/* The local port of sk when it is a UDP socket of network namespace netns
 * (net->ns.inum) and, when port is not 0, bound to that port; -1 otherwise.
 * The cheapest test comes first: most sockets that reach a tracepoint are
 * not UDP. A NULL sk reads as protocol 0 on both paths. */
static __always_inline int udp_port_in(const struct sock *sk, __u32 netns, __u16 port, const bool direct)
{
	if (READ(direct, sk, sk_protocol) != PERFSCOPE_IPPROTO_UDP)
		return -1;
	return udp_local_port_in(sk, netns, port, direct);
}

#endif /* PERFSCOPE_ACCESS_H */
