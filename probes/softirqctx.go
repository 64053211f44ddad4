package probes

import (
	"runtime"

	"github.com/cilium/ebpf/btf"
)

// KernelThreadSize is the size of a task's kernel stack (THREAD_SIZE) on
// kernels where a probe tells softirq from process context by the stack
// the traced code runs on (include/softirqctx.h): x86-64 runs softirqs on
// the CPU's IRQ stack (or in ksoftirqd), and its task stacks are 16 KiB,
// 32 KiB with KASAN (arch/x86/include/asm/page_64_types.h). 0 elsewhere:
// the context is then unknown.
func KernelThreadSize() uint32 {
	if runtime.GOARCH != "amd64" {
		return 0
	}
	types, err := KernelTypes()
	if err != nil {
		return 0
	}
	var fn *btf.Func
	if err := types.TypeByName("kasan_report", &fn); err == nil {
		return 32 << 10
	}
	return 16 << 10
}
