package probes

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// kernelTypes is the kernel's BTF, decoded once for the whole process and
// shared by every load. cilium/ebpf decodes /sys/kernel/btf/vmlinux afresh
// for each btf.LoadKernelSpec and for each collection or program loaded
// without a btf.Cache (~150,000 types, an index sorted by name hash): a
// `perfscope udp` loaded its five probes, their hook checks and the entry
// cost's program with about a dozen decodes, a sixth of the whole run's
// CPU. The decoded types are kept for the process's life; they are read
// lazily from the mapped file, so what stays is the index and the types
// the probes used.
var kernelTypes = btf.NewCache()

// KernelTypes is the running kernel's BTF, decoded on first use. An error
// wraps ebpf.ErrNotSupported when the kernel has no BTF.
func KernelTypes() (*btf.Spec, error) {
	return kernelTypes.Kernel()
}

// LoadOptions are the options every probe loads its collection with: the
// shared kernel BTF (CO-RE relocations and tp_btf targets resolve against it).
func LoadOptions() *ebpf.CollectionOptions {
	return &ebpf.CollectionOptions{Cache: kernelTypes}
}

// newProgram loads one program outside any probe's object (the entry cost's
// empty program, doctor's checks) against the shared kernel BTF:
// ebpf.NewProgram would decode the kernel's BTF for it alone to find a
// tp_btf target.
func newProgram(spec *ebpf.ProgramSpec) (*ebpf.Program, error) {
	name := spec.Name
	if name == "" {
		name = "check"
	}
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{name: spec}}, *LoadOptions())
	if err != nil {
		return nil, err
	}
	defer coll.Close()
	if prog := coll.DetachProgram(name); prog != nil {
		return prog, nil
	}
	return nil, fmt.Errorf("program %q missing from its own collection", spec.Name)
}

// allocateOnInsert makes spec's per-CPU hash maps allocate an element when
// a key is first inserted rather than all of them when the map is created,
// where the kernel allocates BPF map elements safely from any context
// (bpf_mem_alloc, Linux 6.1). Creating a preallocated per-CPU hash
// allocates max_entries values on every CPU: 12 ms of CPU for one of
// 16,384 entries on this 2-CPU VM, 40 ms for a udp run's seven, and a
// server with 64 CPUs pays 32 times that at every start, for tables that
// usually hold a few dozen sockets, ports or call sites. The programs only
// insert a key once and then update its per-CPU value in place, which
// either way allocates nothing. LRU maps always preallocate; older
// kernels keep preallocation, as a tracepoint firing inside the allocator
// could deadlock there.
func allocateOnInsert(spec *ebpf.CollectionSpec) {
	if !allocatesSafely() {
		return
	}
	for _, m := range spec.Maps {
		if m.Type == ebpf.PerCPUHash {
			m.Flags |= unix.BPF_F_NO_PREALLOC
		}
	}
}

// allocatesSafely reports whether the kernel allocates hash map elements
// with bpf_mem_alloc, from its BTF.
var allocatesSafely = sync.OnceValue(func() bool {
	kernel, err := KernelTypes()
	if err != nil {
		return false
	}
	var s *btf.Struct
	return kernel.TypeByName("bpf_mem_alloc", &s) == nil
})
