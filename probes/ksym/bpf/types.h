/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef PERFSCOPE_KSYM_TYPES_H
#define PERFSCOPE_KSYM_TYPES_H

/* Addresses named per run of the program. */
enum { KSYM_BATCH = 64 };
/* Bytes kept of each name, " [module]" included: the kernel's own limit
 * for a symbol (KSYM_NAME_LEN) is 512, which no C symbol comes near. */
enum { KSYM_NAME_BYTES = 248 };

struct ksym_addrs {
	__u64 addr[KSYM_BATCH];
};

struct ksym_name {
	/* What bpf_snprintf returned: the length the full text needed, NUL
	 * included; 0 or less when it failed. */
	__s32 len;
	char name[KSYM_NAME_BYTES];
	__u8 pad[4];
};

struct ksym_names {
	struct ksym_name slot[KSYM_BATCH];
};

#endif
