package probes

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"

	"github.com/perfscope/perfscope/spec"
)

// Hook is one tracepoint a probe handles. The probe's BPF object carries one
// program per attach method for it, named by convention btf_<Name>,
// raw_<Name> and tp_<Name>, so the loader can pick a method without any
// per-probe code.
type Hook = spec.Hook

// hookProgram names the program of hook h for attach method m.
func hookProgram(h Hook, m AttachMethod) string {
	switch m {
	case MethodBTF:
		return "btf_" + h.Name
	case MethodRaw:
		return "raw_" + h.Name
	default:
		return "tp_" + h.Name
	}
}

// RemoveHookPrograms deletes the programs of hooks, for every attach method,
// from spec: for hooks a probe decides not to attach on this kernel (one
// tracepoint made redundant by another), so LoadAndAttach neither loads
// nor attaches them.
func RemoveHookPrograms(spec *ebpf.CollectionSpec, hooks ...Hook) {
	for _, h := range hooks {
		for _, m := range Methods {
			delete(spec.Programs, hookProgram(h, m))
		}
	}
}

// SetVariables sets const volatile globals of spec by name, before load.
func SetVariables(spec *ebpf.CollectionSpec, vars map[string]any) error {
	for name, v := range vars {
		sv, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("set %s: no such variable in the BPF object", name)
		}
		if err := sv.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// Attached is a loaded BPF collection with its tracepoint links. Close
// releases everything; the kernel then frees the programs and maps because
// nothing is pinned.
type Attached struct {
	Collection *ebpf.Collection
	Method     AttachMethod
	// Missing lists optional hooks that did not attach, with the reason.
	Missing map[string]error
	// Programs maps hook names ("irq:softirq_entry") to the attached program.
	Programs map[string]*ebpf.Program

	mu sync.Mutex
	// links holds each hook's link while it is attached; a hook group
	// detached between sampling windows has none (see HookGroup).
	links map[string]link.Link
	hooks map[string]Hook
}

// Close detaches every link and closes every program and map. Safe to
// call more than once.
func (a *Attached) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, l := range a.links {
		errs = append(errs, l.Close())
	}
	a.links = nil
	if a.Collection != nil {
		a.Collection.Close()
		a.Collection = nil
	}
	return errors.Join(errs...)
}

// Links is the number of attached links (used by tests and the overhead
// report).
func (a *Attached) Links() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.links)
}

// attach links hook's program; for classic tracepoints, which resolve
// their event id through tracefs, within WithTracefs unless dir already
// is a mounted tracefs.
func attachHook(m AttachMethod, h Hook, prog *ebpf.Program, dir string) (link.Link, error) {
	var l link.Link
	var err error
	switch m {
	case MethodBTF:
		l, err = link.AttachTracing(link.TracingOptions{Program: prog})
	case MethodRaw:
		l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.Name, Program: prog})
	case MethodTracepoint:
		if dir == "" {
			err = WithTracefs(func(string) error {
				l, err = link.Tracepoint(h.Group, h.Name, prog, nil)
				return err
			})
		} else {
			l, err = link.Tracepoint(h.Group, h.Name, prog, nil)
		}
	default:
		err = fmt.Errorf("attach method %q: %w", m, ErrNotSupported)
	}
	if err != nil {
		return nil, Classify("attach "+string(m)+" "+h.String(), err)
	}
	return l, nil
}

// LoadAndAttach loads spec with the programs for one attach method and
// attaches them to hooks. With MethodAuto it tries tp_btf, raw_tp and classic
// tracepoints in that order and keeps the first that works; the error then
// names why each method failed. Programs in spec that belong to no hook
// (perf_event programs, helpers) are kept and left unattached for the caller.
// configure, when not nil, runs on the trimmed spec before loading (to set
// const volatile variables).
func LoadAndAttach(spec *ebpf.CollectionSpec, hooks []Hook, method AttachMethod, configure func(*ebpf.CollectionSpec) error) (*Attached, error) {
	Prepare()
	methods := Methods
	if method != MethodAuto {
		methods = []AttachMethod{method}
	}
	var why []string
	var lastErr error
	for _, m := range methods {
		a, err := loadWith(spec, hooks, m, configure)
		if err == nil {
			return a, nil
		}
		lastErr = err
		why = append(why, fmt.Sprintf("%s: %v", m, err))
	}
	if len(methods) == 1 {
		return nil, lastErr
	}
	// Report the most telling sentinel: a permission problem beats "not
	// supported" because it is the one the user can fix.
	sentinel := ErrNotSupported
	if strings.Contains(strings.Join(why, "\n"), ErrPermission.Error()) {
		sentinel = ErrPermission
	}
	return nil, fmt.Errorf("no attach method worked (%s): %w", strings.Join(why, "; "), sentinel)
}

func loadWith(full *ebpf.CollectionSpec, hooks []Hook, m AttachMethod, configure func(*ebpf.CollectionSpec) error) (*Attached, error) {
	if m != MethodTracepoint {
		return loadWithTracefs(full, hooks, m, configure, "")
	}
	// Classic tracepoints resolve event ids through tracefs: when it is
	// not mounted, mount it where only this load can see it.
	var a *Attached
	err := WithTracefs(func(dir string) error {
		var err error
		a, err = loadWithTracefs(full, hooks, m, configure, dir)
		return err
	})
	return a, err
}

func loadWithTracefs(full *ebpf.CollectionSpec, hooks []Hook, m AttachMethod, configure func(*ebpf.CollectionSpec) error, dir string) (*Attached, error) {
	spec := full.Copy()
	a := &Attached{Method: m, Missing: map[string]error{}, Programs: map[string]*ebpf.Program{},
		links: map[string]link.Link{}, hooks: map[string]Hook{}}

	// Keep only this method's hook programs.
	hookProgs := map[string]bool{}
	for _, h := range hooks {
		for _, other := range Methods {
			hookProgs[hookProgram(h, other)] = true
		}
	}
	keep := map[string]Hook{}
	for _, h := range hooks {
		keep[hookProgram(h, m)] = h
	}
	for name := range spec.Programs {
		if _, ok := keep[name]; hookProgs[name] && !ok {
			delete(spec.Programs, name)
		}
	}

	switch m {
	case MethodBTF:
		// A tp_btf program for a tracepoint the kernel lacks fails at load,
		// taking the whole collection with it, so drop missing optional
		// hooks first.
		kernel, err := KernelTypes()
		if err != nil {
			return nil, Classify("load kernel BTF", err)
		}
		for _, h := range hooks {
			var t *btf.Typedef
			if err := kernel.TypeByName("btf_trace_"+h.Name, &t); err != nil {
				if !h.Optional {
					return nil, fmt.Errorf("tracepoint %s: %w", h, ErrNotSupported)
				}
				a.Missing[h.String()] = fmt.Errorf("tracepoint %s not in kernel BTF: %w", h, ErrNotSupported)
				delete(spec.Programs, hookProgram(h, m))
			}
		}
	case MethodTracepoint:
		for _, h := range hooks {
			if _, err := os.Stat(fmt.Sprintf("%s/events/%s/%s", dir, h.Group, h.Name)); err != nil {
				if !h.Optional {
					a.Close()
					return nil, fmt.Errorf("tracepoint %s: %w", h, ErrNotSupported)
				}
				a.Missing[h.String()] = fmt.Errorf("tracepoint %s not in tracefs: %w", h, ErrNotSupported)
				delete(spec.Programs, hookProgram(h, m))
			}
		}
	}

	if configure != nil {
		if err := configure(spec); err != nil {
			a.Close()
			return nil, err
		}
	}
	allocateOnInsert(spec)
	coll, err := loadObjects(spec)
	if err != nil {
		a.Close()
		return nil, Classify("load BPF programs ("+string(m)+")", err)
	}
	a.Collection = coll

	for _, h := range hooks {
		name := hookProgram(h, m)
		prog := coll.Programs[name]
		if prog == nil {
			continue // dropped above as missing
		}
		l, err := attachHook(m, h, prog, dir)
		if err != nil {
			if h.Optional && !errors.Is(err, ErrPermission) {
				a.Missing[h.String()] = err
				continue
			}
			a.Close()
			return nil, err
		}
		a.links[h.String()] = l
		a.hooks[h.String()] = h
		a.Programs[h.String()] = prog
	}
	return a, nil
}

// loadObjects loads every program and map of spec, but no Variables.
// ebpf.NewCollection would also memory-map each data section to back its
// Variables, and such a mapping keeps the kernel map alive after Close until
// the garbage collector runs its cleanup: a run would leave its .rodata map
// behind. LoadAndAssign creates only what the target struct names, so the
// struct is built at run time with one field per program and map.
func loadObjects(spec *ebpf.CollectionSpec) (*ebpf.Collection, error) {
	var fields []reflect.StructField
	var progNames, mapNames []string
	add := func(name string, typ reflect.Type) {
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("F%d", len(fields)),
			Type: typ,
			Tag:  reflect.StructTag(fmt.Sprintf("ebpf:%q", name)),
		})
	}
	for name := range spec.Programs {
		progNames = append(progNames, name)
		add(name, reflect.TypeOf((*ebpf.Program)(nil)))
	}
	for name := range spec.Maps {
		// Data sections are loaded as maps on demand by the programs that
		// use them; naming them here would ask for their Variables' memory.
		if strings.HasPrefix(name, ".") {
			continue
		}
		mapNames = append(mapNames, name)
		add(name, reflect.TypeOf((*ebpf.Map)(nil)))
	}
	objs := reflect.New(reflect.StructOf(fields))
	if err := spec.LoadAndAssign(objs.Interface(), LoadOptions()); err != nil {
		return nil, err
	}
	coll := &ebpf.Collection{Programs: map[string]*ebpf.Program{}, Maps: map[string]*ebpf.Map{}}
	v := objs.Elem()
	for i, name := range progNames {
		coll.Programs[name] = v.Field(i).Interface().(*ebpf.Program)
	}
	for i, name := range mapNames {
		coll.Maps[name] = v.Field(len(progNames) + i).Interface().(*ebpf.Map)
	}
	return coll, nil
}
