package probes

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
)

// LoadedProgram is a BPF program currently loaded in the kernel, by anyone.
type LoadedProgram struct {
	ID   uint32
	Name string
	// LoadedAt is the time since boot at which it was loaded.
	LoadedAt time.Duration
	// RunCount and RunTime are its bpf_stats (zero unless statistics are
	// enabled): benchmarks use them to cost other tools' programs.
	RunCount uint64
	RunTime  time.Duration
	// Foreign: a type perfscope never loads (cgroup, socket, XDP, LSM,
	// … programs: systemd's, a CNI's), so not one it left behind; Maps
	// are the maps it uses.
	Foreign bool
	Maps    []uint32
}

// ownTypes are the program types perfscope loads: tracepoints (classic,
// raw — ksym's test-run program too — and BTF), perf events and uprobes
// (kprobe-typed).
var ownTypes = map[ebpf.ProgramType]bool{ebpf.TracePoint: true, ebpf.RawTracepoint: true, ebpf.Tracing: true,
	ebpf.PerfEvent: true, ebpf.Kprobe: true}

// LoadedPrograms lists every BPF program loaded in the kernel. Tests use it
// to prove that perfscope leaves nothing behind, the way `bpftool prog show`
// would, without needing bpftool.
func LoadedPrograms() ([]LoadedProgram, error) {
	var out []LoadedProgram
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, Classify("list BPF programs", err)
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded in between
		}
		info, err := p.Info()
		stats, statsErr := p.Stats()
		p.Close()
		if err != nil {
			return out, fmt.Errorf("program %d info: %w", id, err)
		}
		lp := LoadedProgram{ID: uint32(id), Name: info.Name, Foreign: !ownTypes[info.Type]}
		if ids, ok := info.MapIDs(); ok {
			for _, m := range ids {
				lp.Maps = append(lp.Maps, uint32(m))
			}
		}
		lp.LoadedAt, _ = info.LoadTime()
		if statsErr == nil {
			lp.RunCount, lp.RunTime = stats.RunCount, stats.Runtime
		}
		out = append(out, lp)
	}
}

// LoadedMapIDs lists the ids of every BPF map in the kernel.
func LoadedMapIDs() ([]uint32, error) {
	var out []uint32
	id := ebpf.MapID(0)
	for {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, Classify("list BPF maps", err)
		}
		id = next
		out = append(out, uint32(id))
	}
}
