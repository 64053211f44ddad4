package probes

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// EmptyPrograms are programs that do nothing, attached as tp_btf (the
// method perfscope's probes pick where BTF exists) to tracepoints by name.
// They are the floor of what any BPF tool pays on those tracepoints: the
// static call, the trampoline and the program's entry and exit, with no
// work. Benchmarks compare perfscope against them.
type EmptyPrograms struct {
	progs []*ebpf.Program
	links []link.Link
}

// AttachEmpty attaches one empty program to each tracepoint in names
// (bare names, e.g. "softirq_entry").
func AttachEmpty(names []string) (*EmptyPrograms, error) {
	Prepare()
	e := &EmptyPrograms{}
	for _, name := range names {
		prog, err := load(&ebpf.ProgramSpec{Name: "empty", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: name})
		if err != nil {
			e.Close()
			return nil, Classify(fmt.Sprintf("load an empty tp_btf program for %s", name), err)
		}
		e.progs = append(e.progs, prog)
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			e.Close()
			return nil, Classify(fmt.Sprintf("attach an empty tp_btf program to %s", name), err)
		}
		e.links = append(e.links, l)
	}
	return e, nil
}

// Close detaches and unloads every program.
func (e *EmptyPrograms) Close() error {
	var errs []error
	for _, l := range e.links {
		errs = append(errs, l.Close())
	}
	for _, p := range e.progs {
		errs = append(errs, p.Close())
	}
	e.links, e.progs = nil, nil
	return errors.Join(errs...)
}
