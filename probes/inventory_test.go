package probes_test

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

// A program of a type perfscope never loads (a socket filter here, as
// systemd loads cgroup programs) is listed as another tool's, with its
// maps, so that a leak check does not blame perfscope for it; a
// tracepoint program is perfscope's kind, and a leak check counts it.
func TestLoadedProgramsMarkForeignTypes(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	load := func(typ ebpf.ProgramType) *ebpf.Program {
		// r0 = *(map[0]) or 0: the program uses the map.
		insns := asm.Instructions{
			asm.StoreImm(asm.R10, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.R10),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.FnMapLookupElem.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		}
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, Instructions: insns, License: "GPL"})
		if err != nil {
			t.Fatalf("load a %v program: %v", typ, err)
		}
		return p
	}
	filter := load(ebpf.SocketFilter)
	defer filter.Close()
	tp := load(ebpf.TracePoint)
	defer tp.Close()
	fi, _ := filter.Info()
	ti, _ := tp.Info()
	fid, _ := fi.ID()
	tid, _ := ti.ID()
	mi, _ := m.Info()
	mid, _ := mi.ID()
	all, err := probes.LoadedPrograms()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range all {
		switch p.ID {
		case uint32(fid):
			seen++
			if !p.Foreign || len(p.Maps) != 1 || p.Maps[0] != uint32(mid) {
				t.Errorf("socket filter listed %+v, want another tool's, using map %d", p, mid)
			}
		case uint32(tid):
			seen++
			if p.Foreign {
				t.Errorf("tracepoint program listed as another tool's: %+v", p)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("listed %d of the 2 programs loaded", seen)
	}
	// With perfscope's kind closed, the socket filter and its map still
	// loaded are no leak.
	tp.Close()
	testutil.AssertNoNewBPF(t, progs, maps)
}
