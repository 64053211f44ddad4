// Package ksym names kernel addresses with the kernel's own symbol lookup:
// a BPF program, never attached, formats each address with bpf_snprintf's
// "%ps" — kallsyms_lookup(), which searches the kernel's compressed symbol
// table and its modules, BPF programs and trampolines — when user space
// runs it with BPF_PROG_TEST_RUN.
//
// Naming the few thousand addresses a profile samples this way costs a
// millisecond or two. The alternative, /proc/kallsyms, has the kernel print
// every one of its ~200,000 symbols (a vsnprintf each) for user space to
// parse and index: 35-70 ms of CPU on this project's VMs, the largest
// single part of a short run's cost after loading the probes. And the
// answer is always the kernel's current table: modules and BPF programs
// loaded after the run started are named too.
//
// It needs bpf_snprintf (Linux 5.13) and BPF_PROG_TEST_RUN for raw
// tracepoint programs (5.10); where either is missing Open or Names fails
// and the caller reads /proc/kallsyms instead (symbols.Symbolizer does).
package ksym

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/probes"
)

// Namer is the loaded program and its two maps. It is safe for concurrent
// use.
type Namer struct {
	mu   sync.Mutex
	objs namerObjects
	// in and out are the maps' values, kept to name batch after batch
	// without allocating 64 KiB each time.
	in  ksymKsymAddrs
	out ksymKsymNames
}

// namerObjects leaves out the generated Variables: the object has none,
// and a Collection's memory-mapped data sections outlive Close (see
// probes.loadObjects).
type namerObjects struct {
	ksymPrograms
	ksymMaps
}

var _ symbols.KernelNamer = (*Namer)(nil)

// Batch is how many addresses one run of the program names.
const Batch = len(ksymKsymAddrs{}.Addr)

// Open loads the program. It attaches nothing.
func Open() (*Namer, error) {
	spec, err := loadKsym()
	if err != nil {
		return nil, fmt.Errorf("load ksym BPF spec: %w", err)
	}
	probes.Prepare()
	n := &Namer{}
	if err := spec.LoadAndAssign(&n.objs, probes.LoadOptions()); err != nil {
		return nil, probes.Classify("load the kernel symbol namer (bpf_snprintf %ps)", err)
	}
	return n, nil
}

// Close releases the program and its maps. Safe to call more than once.
func (n *Namer) Close() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.objs.ksymPrograms.Close()
	if e := n.objs.ksymMaps.Close(); err == nil {
		err = e
	}
	n.objs = namerObjects{}
	return err
}

// NameKernel names addrs: out[i] is addrs[i]'s function and module (empty
// for the kernel image), or not OK when no symbol covers the address.
func (n *Namer) NameKernel(addrs []uint64) ([]symbols.KernelName, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.objs.NameAddrs == nil {
		return nil, errors.New("kernel symbol namer: closed")
	}
	out := make([]symbols.KernelName, 0, len(addrs))
	for len(addrs) > 0 {
		batch := addrs[:min(len(addrs), Batch)]
		addrs = addrs[len(batch):]
		copy(n.in.Addr[:], batch)
		if err := n.objs.Addrs.Update(uint32(0), &n.in, ebpf.UpdateAny); err != nil {
			return nil, probes.Classify("kernel symbol namer: write addresses", err)
		}
		if _, err := n.objs.NameAddrs.Run(&ebpf.RunOptions{Context: []uint64{uint64(len(batch))}}); err != nil {
			return nil, probes.Classify("kernel symbol namer: run", err)
		}
		if err := n.objs.Names.Lookup(uint32(0), &n.out); err != nil {
			return nil, probes.Classify("kernel symbol namer: read names", err)
		}
		for i := range batch {
			out = append(out, parseName(&n.out.Slot[i]))
		}
	}
	return out, nil
}

// parseName reads one slot: "func" or "func [module]" is a symbol, "0x…"
// (the kernel prints the address when no symbol covers it) and a failed
// bpf_snprintf are not.
func parseName(s *ksymKsymName) symbols.KernelName {
	if s.Len <= 1 {
		return symbols.KernelName{}
	}
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&s.Name[0])), len(s.Name))
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	text := string(raw)
	if text == "" || strings.HasPrefix(text, "0x") {
		return symbols.KernelName{}
	}
	name, module := text, ""
	if i := strings.Index(text, " ["); i > 0 && strings.HasSuffix(text, "]") {
		name, module = text[:i], text[i+2:len(text)-1]
	}
	if module == "" && jitted.MatchString(name) {
		// The kernel's lookup clears the module of a BPF program or
		// trampoline (bpf_address_lookup), which /proc/kallsyms lists
		// as [bpf]: named alike, whichever of the two named it.
		module = "bpf"
	}
	return symbols.KernelName{Name: name, Module: module, OK: true}
}

// jitted are the names the kernel gives JIT-compiled BPF code in
// kallsyms (kernel/bpf/core.c bpf_get_prog_name, trampoline.c): a
// program, bpf_prog_<tag>[_<name>], and a trampoline,
// bpf_trampoline_<key>. Kernel functions such as bpf_prog_alloc do not
// match.
var jitted = regexp.MustCompile(`^bpf_prog_[0-9a-f]{16}(_|$)|^bpf_trampoline_[0-9]+$`)
