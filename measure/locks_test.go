package measure

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
)

func TestSocketContention(t *testing.T) {
	sw := lockstat.SocketWait{
		Socket: lockstat.SocketRef{Owner: lockstat.Owner{Field: lockstat.FieldReceiveQueue, Protocol: "udp", Port: 9000, Inode: 11, NetNS: 7},
			Local: netip.MustParseAddrPort("10.0.0.2:9000")},
		WaitStats: lockstat.WaitStats{Count: 3, Total: 30 * time.Microsecond, Max: 20 * time.Microsecond},
		ByField: []lockstat.FieldWait{
			{Field: lockstat.FieldReceiveQueue, WaitStats: lockstat.WaitStats{Count: 2, Total: 25 * time.Microsecond, Max: 20 * time.Microsecond}},
			{Field: lockstat.FieldWaitQueue, WaitStats: lockstat.WaitStats{Count: 1, Total: 5 * time.Microsecond, Max: 5 * time.Microsecond}},
		},
	}
	sc := socketContention(sw, procfs.FS{Root: t.TempDir()})
	want := evidence.SocketRef{Local: "10.0.0.2:9000", Port: 9000, Protocol: "udp", Inode: 11, NetNS: 7, Field: "sk_receive_queue.lock"}
	if sc.Socket != want || sc.Count != 3 || sc.TotalNs != 30000 || sc.MaxNs != 20000 {
		t.Errorf("socketContention = %+v", sc)
	}
	if len(sc.ByLock) != 2 || sc.ByLock[1] != (evidence.SocketLockWait{Field: "socket.wq.wait.lock", Count: 1, TotalNs: 5000, MaxNs: 5000}) {
		t.Errorf("by lock = %+v", sc.ByLock)
	}
	// Another namespace: no address, so the port and namespace name it.
	sw.Socket.Local, sw.Socket.OtherNetNS = netip.AddrPort{}, true
	if sc := socketContention(sw, procfs.FS{Root: t.TempDir()}); sc.Socket.Local != "" || !sc.Socket.OtherNetNS {
		t.Errorf("other namespace: %+v", sc.Socket)
	}
}

// Sampled bpf_stats: the counts of the sampler's own windows replace the
// window's counter deltas and scale to the window, per-run times do not,
// and the BPF share is recomputed from the scaled totals.
func TestScaleCostsFromSampledStats(t *testing.T) {
	// The counters grew by 3000 runs over the window, including another
	// run's statistics windows; the sampler counted 1000 inside its own.
	ov := &evidence.Overhead{Programs: []evidence.ProgramCost{evidence.NewProgramCost("net:netif_receive_skb", 3000, 200*time.Microsecond)}}
	sample := probes.StatsSample{On: 100 * time.Millisecond, Total: time.Second, Shared: true,
		Costs: []probes.ProgramCost{{Program: "net:netif_receive_skb", RunCount: 1000, RunTime: 60 * time.Microsecond}}}
	scaleCosts(ov, sample)
	ov.BPFTimeShare = bpfShare(ov.Programs, time.Second, 2)
	p := ov.Programs[0]
	if p.RunCount != 10000 || p.RunTimeNs != 600000 || p.PerRunNs != 60 {
		t.Errorf("scaled program: %+v", p)
	}
	if ov.BPFTimeShare != 600e3/2e9 || ov.StatsSample == nil || ov.StatsSample.Scale != 10 || !ov.StatsSample.Shared {
		t.Errorf("overhead: share %v, sample %+v", ov.BPFTimeShare, ov.StatsSample)
	}
}

// A session measures window after window: each window's costs are the
// programs' runs since the window began, not since the probe loaded.
func TestCostDeltaPerWindow(t *testing.T) {
	before := [][]probes.ProgramCost{{{Program: "a", RunCount: 10, RunTime: 1000}}, {}}
	after := [][]probes.ProgramCost{{{Program: "a", RunCount: 15, RunTime: 1600}}, {{Program: "b", RunCount: 3, RunTime: 30}}}
	got := costDelta(after, before)
	if len(got) != 2 || got[0].RunCount != 5 || got[0].RunTimeNs != 600 || got[0].PerRunNs != 120 || got[1].RunCount != 3 {
		t.Errorf("costDelta = %+v", got)
	}
}

// Runs the kernel skipped (recursion_misses) are the window's too, and
// survive scaling from sampled bpf_stats: they are counted throughout.
func TestCostDeltaCarriesMissedRuns(t *testing.T) {
	before := [][]probes.ProgramCost{{{Program: "tcp:tcp_retransmit_skb", RunCount: 10, Missed: 4}}}
	after := [][]probes.ProgramCost{{{Program: "tcp:tcp_retransmit_skb", RunCount: 40, Missed: 6}}}
	ov := &evidence.Overhead{Programs: costDelta(after, before)}
	if ov.Programs[0].Missed != 2 {
		t.Fatalf("missed over the window = %d, want 2", ov.Programs[0].Missed)
	}
	scaleCosts(ov, probes.StatsSample{On: time.Second, Total: 2 * time.Second,
		Costs: []probes.ProgramCost{{Program: "tcp:tcp_retransmit_skb", RunCount: 15}}})
	if p := ov.Programs[0]; p.RunCount != 30 || p.Missed != 2 {
		t.Errorf("scaled: %+v, want 30 runs and 2 missed", p)
	}
}

// fakePart counts its readings; failBegin makes its Begin fail.
type fakePart struct {
	begins, ends int
	failBegin    bool
}

func (f *fakePart) Open(Sources) error        { return nil }
func (f *fakePart) Probes() []probes.Probe    { return nil }
func (f *fakePart) End(context.Context) error { f.ends++; return nil }
func (f *fakePart) Begin(ctx context.Context) error {
	f.begins++
	if f.failBegin {
		return errors.New("begin failed")
	}
	return nil
}

// A window that fails half-way ends the parts it began, so none keeps
// background work going against probes about to close.
func TestWindowEndsBegunPartsOnError(t *testing.T) {
	a, b, c := &fakePart{}, &fakePart{failBegin: true}, &fakePart{}
	_, err := Measure(context.Background(), Sources{}, Window{Duration: time.Millisecond}, a, b, c)
	if err == nil || a.ends != 1 || c.begins != 0 || c.ends != 0 {
		t.Errorf("err %v; parts %+v %+v %+v", err, a, b, c)
	}
	a, c = &fakePart{}, &fakePart{}
	run, err := Measure(context.Background(), Sources{Root: procfs.FS{Root: t.TempDir()}}, Window{Duration: time.Millisecond}, a, c)
	if err != nil || a.begins != 1 || a.ends != 1 || c.ends != 1 || run.Overhead == nil || run.Duration() <= 0 {
		t.Errorf("a window without probes: %v, %+v %+v, %+v", err, a, c, run)
	}
}
