package probes

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
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
