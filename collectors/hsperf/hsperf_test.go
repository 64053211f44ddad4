package hsperf

import (
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the synthesized big-endian fixture")

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// toBigEndian rewrites a little-endian perfMemory image as a big-endian JVM
// (s390x, old SPARC) would have written it: no such JVM runs here, so the
// fixture is synthesized from a real capture.
func toBigEndian(t *testing.T, le []byte) []byte {
	t.Helper()
	b := append([]byte(nil), le...)
	if b[4] != byteOrderLittle {
		t.Fatal("source fixture is not little-endian")
	}
	b[4] = byteOrderBig
	swap32 := func(off int) {
		binary.BigEndian.PutUint32(b[off:], binary.LittleEndian.Uint32(le[off:]))
	}
	for _, off := range []int{8, 12, 24, 28} {
		swap32(off)
	}
	binary.BigEndian.PutUint64(b[16:], binary.LittleEndian.Uint64(le[16:]))
	off := int(binary.LittleEndian.Uint32(le[24:]))
	n := int(binary.LittleEndian.Uint32(le[28:]))
	for i := 0; i < n; i++ {
		length := int(binary.LittleEndian.Uint32(le[off:]))
		for _, f := range []int{0, 4, 8, 16} {
			swap32(off + f)
		}
		dataOff := int(binary.LittleEndian.Uint32(le[off+16:]))
		if le[off+12] == typeLong && binary.LittleEndian.Uint32(le[off+8:]) == 0 {
			p := off + dataOff
			binary.BigEndian.PutUint64(b[p:], binary.LittleEndian.Uint64(le[p:]))
		}
		off += length
	}
	return b
}

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file, policy, young string
		bigEndian           bool
	}{
		{"jdk17-g1.hsperf", "GarbageFirst", "G1 young collection pauses", false},
		{"jdk25-serial.hsperf", "Copy:MSC", "Serial young collection pauses", false},
		{"synthetic-be.hsperf", "GarbageFirst", "G1 young collection pauses", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Parse(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if s.BigEndian != tc.bigEndian || !s.Accessible || s.Major != 2 {
				t.Errorf("prologue: big-endian %v accessible %v version %d.%d", s.BigEndian, s.Accessible, s.Major, s.Minor)
			}
			h := s.Heap()
			if len(h.Missing) > 0 {
				t.Errorf("missing counters: %v", h.Missing)
			}
			if h.Policy != tc.policy || h.YoungCollector != tc.young {
				t.Errorf("policy %q young collector %q", h.Policy, h.YoungCollector)
			}
			if h.EdenCapacity <= 0 || h.OldCapacity <= 0 || h.YoungGCs <= 0 {
				t.Errorf("implausible heap %+v", h)
			}
			if !h.InitDone || !h.Attachable {
				t.Errorf("init done %v attachable %v", h.InitDone, h.Attachable)
			}
			if h.VMStarted.Year() != 2026 {
				t.Errorf("VM started %v", h.VMStarted)
			}
			if h.YoungGCTime <= 0 || h.YoungGCTime > time.Second {
				t.Errorf("young GC time %v: ticks not converted with sun.os.hrt.frequency", h.YoungGCTime)
			}
			if h.Cause != "No GC" {
				t.Errorf("cause %q", h.Cause)
			}
			// The JVM's clock runs past its last young GC's end (JDK 25
			// no longer publishes its clock).
			if h.YoungGCEnded <= 0 || (h.Clock != 0 || tc.file != "jdk25-serial.hsperf") && h.Clock <= h.YoungGCEnded {
				t.Errorf("last young GC ended at %v, the clock reads %v", h.YoungGCEnded, h.Clock)
			}
		})
	}
	// The recording from JDK 17: 4.31 s since its last young GC.
	h, _ := Parse(readFixture(t, "jdk17-g1.hsperf"))
	if hh := h.Heap(); hh.Clock-hh.YoungGCEnded != 4310290039*time.Nanosecond {
		t.Errorf("since the last young GC: %v", hh.Clock-hh.YoungGCEnded)
	}
}

func TestBigEndianMatchesLittleEndian(t *testing.T) {
	le := readFixture(t, "jdk17-g1.hsperf")
	be := toBigEndian(t, le)
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", "synthetic-be.hsperf"), be, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Parse(le)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(readFixture(t, "synthetic-be.hsperf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Counters) != len(b.Counters) || len(a.Counters) < 100 {
		t.Fatalf("counters: little-endian %d, big-endian %d", len(a.Counters), len(b.Counters))
	}
	for name, c := range a.Counters {
		if b.Counters[name] != c {
			t.Errorf("%s: little-endian %+v, big-endian %+v", name, c, b.Counters[name])
		}
	}
}

func TestParseRejectsBrokenFiles(t *testing.T) {
	good := readFixture(t, "jdk17-g1.hsperf")
	used := int(binary.LittleEndian.Uint32(good[8:]))
	corrupt := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(corrupt[32:], 1<<30) // first entry's length
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"header only", good[:20], ErrTruncated},
		{"cut mid-entries", good[:used/2], ErrTruncated},
		{"not hsperfdata", []byte(strings.Repeat("#!/bin/sh\n", 10)), ErrBadMagic},
		{"entry longer than file", corrupt, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestProcessAndLocate(t *testing.T) {
	fs := FS{Root: filepath.Join("testdata", "root")}
	p, err := fs.Process(4242)
	if err != nil {
		t.Fatal(err)
	}
	if p.NSPID != 1 || p.UID != 1000 || p.GID != 1000 || p.Threads != 26 {
		t.Errorf("process %+v", p)
	}
	if !p.CatchesSignal(3) {
		t.Error("fixture JVM catches SIGQUIT, CatchesSignal says no")
	}
	if p.CatchesSignal(9) {
		t.Error("nothing catches SIGKILL")
	}
	path, err := fs.Locate(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := fs.TargetPath(4242, "/tmp/hsperfdata_app/1"); path != want {
		t.Errorf("located %s, want %s (user from the container's passwd, namespaced pid)", path, want)
	}
	if _, err := fs.Snapshot(path); err != nil {
		t.Error(err)
	}
	if _, err := fs.Process(4243); !errors.Is(err, ErrNoProcess) {
		t.Errorf("absent pid: %v", err)
	}
	p.NSPID = 2
	if _, err := fs.Locate(p); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent hsperfdata: %v", err)
	}
	if _, err := fs.Snapshot(filepath.Join("testdata", "nope")); !errors.Is(err, ErrNotFound) {
		t.Errorf("absent file: %v", err)
	}
}

func TestParseStatusWithoutNamespaces(t *testing.T) {
	p, err := parseStatus(strings.NewReader("Name:\tjava\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nSigCgt:\t0000000000000000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.CatchesSignal(3) || p.Name != "java" {
		t.Errorf("%+v", p)
	}
	if _, err := parseStatus(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("status without Uid accepted")
	}
	if p.Exited {
		t.Error("a status without State is not a zombie")
	}
	// A JVM killed with SIGKILL is a zombie until its parent reaps it.
	z, err := parseStatus(strings.NewReader("Name:\tjava\nState:\tZ (zombie)\nUid:\t0\t0\t0\t0\n"))
	if err != nil || !z.Exited {
		t.Errorf("zombie: %+v %v", z, err)
	}
}

func TestWindowReconstructsAllocation(t *testing.T) {
	const eden = 100
	var w Window
	for _, h := range []Heap{
		{EdenCapacity: eden, EdenUsed: 10, OldUsed: 500},
		{EdenCapacity: eden, EdenUsed: 40, OldUsed: 500},                        // +30
		{EdenCapacity: eden, EdenUsed: 20, OldUsed: 530, YoungGCs: 1},           // 60 left + 20 after; 30 promoted
		{EdenCapacity: eden, EdenUsed: 5, OldUsed: 530, YoungGCs: 3},            // 80 + one whole Eden + 5
		{EdenCapacity: eden, EdenUsed: 0, OldUsed: 100, YoungGCs: 3, OldGCs: 1}, // full GC: 95 left, no promotion counted
		{EdenCapacity: eden, EdenUsed: 0, OldUsed: 100, YoungGCs: 3, OldGCs: 1}, // idle
	} {
		w.Add(h)
	}
	if want := int64(30 + 80 + 185 + 95); w.EdenAllocated != want {
		t.Errorf("allocated %d, want %d", w.EdenAllocated, want)
	}
	if w.Promoted != 30 || w.PromotingGCs != 3 {
		t.Errorf("promoted %d over %d GCs, want 30 over 3", w.Promoted, w.PromotingGCs)
	}
	if w.YoungGCs() != 3 || w.OldGCs() != 1 || w.Samples() != 6 {
		t.Errorf("young %d old %d samples %d", w.YoungGCs(), w.OldGCs(), w.Samples())
	}
}

// G1 collects before Eden is full: the estimate follows the occupancy seen
// before each lone young GC, not the capacity.
func TestWindowEdenAtCollection(t *testing.T) {
	var w Window
	if _, _, ok := w.EdenAtCollection(); ok {
		t.Error("estimate without samples")
	}
	const eden = 130
	for _, h := range []Heap{
		{EdenCapacity: eden, EdenUsed: 100},
		{EdenCapacity: eden, EdenUsed: 110},             // +10
		{EdenCapacity: eden, EdenUsed: 120},             // +10
		{EdenCapacity: eden, EdenUsed: 2, YoungGCs: 1},  // a lone GC, seen at 120
		{EdenCapacity: eden, EdenUsed: 12, YoungGCs: 1}, // +10
		{EdenCapacity: eden, EdenUsed: 3, YoungGCs: 3},  // two GCs in one interval: not used
		{EdenCapacity: eden, EdenUsed: 13, YoungGCs: 3}, // +10
	} {
		w.Add(h)
	}
	// 120 seen before the lone GC, plus half the mean growth per interval.
	if got, src, ok := w.EdenAtCollection(); !ok || got != 125 || src != "hsperfdata-occupancy" {
		t.Errorf("eden at collection %d %s %v, want 125 from the occupancy", got, src, ok)
	}
	w.Add(Heap{EdenCapacity: eden, EdenUsed: 129})
	w.Add(Heap{EdenCapacity: eden, EdenUsed: 0, YoungGCs: 4})
	got, _, _ := w.EdenAtCollection()
	if got > eden {
		t.Errorf("%d above capacity", got)
	}
}

// The JVM's own per-cycle allocation, published at each GC, wins over the
// occupancy estimate.
func TestWindowEdenAtCollectionFromCycleCounter(t *testing.T) {
	var w Window
	for _, h := range []Heap{
		{EdenCapacity: 130, EdenUsed: 100, HasCycle: true, CycleAllocated: 7},
		{EdenCapacity: 130, EdenUsed: 5, YoungGCs: 1, HasCycle: true, CycleAllocated: 123},
		{EdenCapacity: 130, EdenUsed: 50, YoungGCs: 1, HasCycle: true, CycleAllocated: 123},
		{EdenCapacity: 130, EdenUsed: 9, YoungGCs: 3, HasCycle: true, CycleAllocated: 121},
	} {
		w.Add(h)
	}
	if got, src, ok := w.EdenAtCollection(); !ok || got != 122 || src != "hsperfdata-cycle" {
		t.Errorf("eden at collection %d %s %v, want 122 from the cycle counter", got, src, ok)
	}
}

// The hsperfdata directory belongs to the JVM's user: a symlink planted
// under the file's name (to /dev/zero, to another file), a FIFO, or an
// oversized file is refused at once instead of followed, waited on or read
// without end.
func TestSnapshotRefusesWhatIsNotARegularFile(t *testing.T) {
	good, err := os.ReadFile("testdata/jdk17-g1.hsperf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.WriteFile(real, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Snapshot(real); err != nil {
		t.Fatalf("a regular hsperfdata file: %v", err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, good, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Truncate(big, MaxFileBytes+1)
	for _, p := range []string{link, zero, fifo, big} {
		done := make(chan error, 1)
		go func() {
			_, err := Default.Snapshot(p)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read, want refused", filepath.Base(p))
			} else if !strings.Contains(err.Error(), p) {
				t.Errorf("%s: error %q does not name the path", filepath.Base(p), err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", filepath.Base(p))
		}
	}
}
