/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Is this CPU serving a softirq? Told without the per-CPU preempt count,
 * whose address is a data symbol that neither the loader nor the verifier
 * can resolve without CONFIG_KALLSYMS_ALL: either the program runs on
 * another stack than the current task's (x86-64's irq_exit and
 * local_bh_enable switch to the CPU's IRQ stack to run softirqs; the
 * callers never run in a hard interrupt) or the task is ksoftirqd.
 *
 * marker is an address on the kernel stack the traced code runs on: a raw
 * tracepoint's arguments, which bpf_trace_run keeps there. Not the
 * program's own stack: since 6.13 x86-64 may run tracing programs on a
 * per-CPU private stack. A classic tracepoint's context is a per-CPU
 * buffer: callers pass 0 and get "unknown".
 *
 * The including object declares `const volatile __u32 thread_size`, the
 * kernel's THREAD_SIZE (set by user space; 0 where the stack does not tell,
 * which also gives "unknown").
 */
#ifndef PERFSCOPE_SOFTIRQCTX_H
#define PERFSCOPE_SOFTIRQCTX_H

struct task_struct___softirqctx {
	void *stack;        /* its kernel stack, THREAD_SIZE bytes */
	unsigned int flags; /* PF_* */
} __attribute__((preserve_access_index));

enum softirq_ctx { CTX_UNKNOWN = 0, CTX_PROCESS = 1, CTX_SOFTIRQ = 2 };

static __always_inline enum softirq_ctx waiter_context(const void *marker)
{
	enum { PF_KTHREAD___softirqctx = 0x00200000 };
	if (!thread_size || !marker)
		return CTX_UNKNOWN;
	struct task_struct___softirqctx *task = (void *)bpf_get_current_task();
	__u64 base = (__u64)BPF_CORE_READ(task, stack);
	__u64 sp = (__u64)marker;
	if (sp < base || sp >= base + thread_size)
		return CTX_SOFTIRQ;
	if (!(BPF_CORE_READ(task, flags) & PF_KTHREAD___softirqctx))
		return CTX_PROCESS;
	char comm[16];
	if (bpf_get_current_comm(comm, sizeof(comm)))
		return CTX_PROCESS;
	const char want[] = "ksoftirqd/";
	for (int i = 0; i < sizeof(want) - 1; i++)
		if (comm[i] != want[i])
			return CTX_PROCESS;
	return CTX_SOFTIRQ;
}

#endif
