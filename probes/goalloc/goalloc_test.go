package goalloc

import (
	"testing"
)

func TestOpenRejectsIncompleteOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{PID: 1, Executable: "/proc/1/exe", GC: 1, SizeArg: RBX},
		{PID: 1, Executable: "/proc/1/exe", Malloc: 1, GC: 1, SizeArg: 99},
	} {
		if p, err := Open(o); err == nil {
			p.Close()
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

// Sub matches samples by stack and size, and drops pools whose counters
// went back (a pool address reused after the probe was reloaded).
func TestSnapshotSub(t *testing.T) {
	prev := Snapshot{SampleCount: 3, GCCycles: 1,
		Samples: []Sample{{Stack: []uint64{1, 2}, Size: 64, Count: 2}, {Stack: []uint64{1, 2}, Size: 128, Count: 1}},
		Pools:   map[uint64]PoolCounts{0x10: {Gets: 5, Puts: 5}, 0x20: {Gets: 9}}}
	cur := Snapshot{SampleCount: 7, GCCycles: 4,
		Samples: []Sample{{Stack: []uint64{1, 2}, Size: 64, Count: 5}, {Stack: []uint64{1, 2}, Size: 128, Count: 1}, {Stack: []uint64{3}, Size: 64, Count: 1}},
		Pools:   map[uint64]PoolCounts{0x10: {Gets: 8, Puts: 7, News: 1}, 0x20: {Gets: 2}}}
	d := cur.Sub(prev)
	if d.SampleCount != 4 || d.GCCycles != 3 || len(d.Samples) != 2 {
		t.Fatalf("delta %+v", d)
	}
	for _, s := range d.Samples {
		if (s.Size == 64 && len(s.Stack) == 2 && s.Count != 3) || (len(s.Stack) == 1 && s.Count != 1) {
			t.Errorf("sample %+v", s)
		}
	}
	if d.Pools[0x10] != (PoolCounts{Gets: 3, Puts: 2, News: 1}) || d.Pools[0x20] != (PoolCounts{Gets: 2}) {
		t.Errorf("pools %+v", d.Pools)
	}
}
