// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ksym: names kernel addresses with the kernel's own symbol lookup — the
 * "%ps" of bpf_snprintf is kallsyms_lookup(), a binary search over the
 * kernel's compressed symbol table plus its modules, BPF programs and
 * trampolines — so that naming a profile's kernel frames costs a few
 * microseconds per address the profile sampled, instead of having the
 * kernel print all ~200,000 lines of /proc/kallsyms (one vsnprintf each)
 * and user space parse and index them.
 *
 * Not attached anywhere: user space writes up to KSYM_BATCH addresses into
 * `addrs`, runs the program with BPF_PROG_TEST_RUN (its one context
 * argument is how many), and reads `names`: "func" or "func [module]", or
 * "0x…" for an address no symbol covers.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include "types.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ksym_addrs);
} addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ksym_names);
} names SEC(".maps");

static const char fmt[] = "%ps";

SEC("raw_tp")
int name_addrs(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct ksym_addrs *in = bpf_map_lookup_elem(&addrs, &zero);
	struct ksym_names *out = bpf_map_lookup_elem(&names, &zero);
	if (!in || !out)
		return 0;
	__u64 n = ctx->args[0];
	for (__u32 i = 0; i < KSYM_BATCH; i++) {
		if (i >= n)
			break;
		struct ksym_name *slot = &out->slot[i];
		slot->len = bpf_snprintf(slot->name, sizeof(slot->name), fmt, &in->addr[i], sizeof(in->addr[i]));
	}
	return 0;
}
