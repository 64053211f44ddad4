/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * stackhash: stacks stored under a 64-bit hash of their frames, in a plain
 * hash map, by the probes that record stacks (cpuprofile, offcpu).
 *
 * Not a BPF_MAP_TYPE_STACK_TRACE: that map keeps one stack per bucket of
 * hash & (entries - 1) and refuses (-EEXIST) every later stack that lands
 * in a taken bucket, so a hot stack whose bucket an idle one took first is
 * lost for the whole run. Keyed by the full hash, a stack is lost only
 * when the map is full.
 *
 * Usage: bpf_get_stack (or bpf_get_task_stack) into a per-CPU buffer whose
 * first member is the frames, then
 *
 *   switch (store_frames(&stacks, buf, buf->ips, n, &hash)) { ... }
 */
#ifndef PERFSCOPE_STACKHASH_H
#define PERFSCOPE_STACKHASH_H

/* PERF_MAX_STACK_DEPTH: the deepest stack bpf_get_stack records. */
enum { STACKHASH_MAX_DEPTH = 127 };

/* stack_hash mixes each frame in with steps that are each one-to-one in
 * the running hash (xor, multiply by an odd constant, xor-shift), so two
 * stacks of the same depth that differ in one frame never share a hash;
 * other pairs collide with probability 2^-64. */
static __always_inline __u64 stack_hash(const __u64 *ips, __u32 depth)
{
	__u64 h = 0x9e3779b97f4a7c15ULL ^ depth;
	for (__u32 i = 0; i < STACKHASH_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		h ^= ips[i];
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 33;
	}
	return h;
}

enum store_result { STORED, EMPTY, FAULT, FULL };

/* store_frames stores the n bytes bpf_get_stack wrote (n < 0: its error;
 * 0: no frames, e.g. the kernel half of a sample taken in user mode) at
 * ips, in map under their hash; value is the map's value (the buffer
 * holding ips, zeroed after the last frame). */
static __always_inline enum store_result store_frames(void *map, const void *value, const __u64 *ips, long n, __u64 *hash)
{
	if (n < 0)
		return FAULT;
	if (n == 0)
		return EMPTY;
	*hash = stack_hash(ips, (__u32)n / sizeof(__u64));
	/* Nearly every stack is already there: look before copying a
	 * kilobyte in. */
	if (bpf_map_lookup_elem(map, hash))
		return STORED;
	long err = bpf_map_update_elem(map, hash, value, BPF_NOEXIST);
	if (err == 0 || err == -17 /* EEXIST: another CPU stored it */)
		return STORED;
	return FULL;
}

#endif
