package measure

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/report"
)

// floodDuring runs a bounded two-sender loopback flood into one socket for
// d, from now.
func floodDuring(t *testing.T, d time.Duration) (port int, done <-chan error) {
	t.Helper()
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	ch := make(chan error, 1)
	go func() {
		_, err := udpflood.Send(context.Background(), udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: d, MaxPackets: 20_000_000})
		ch <- err
	}()
	return int(sink.AddrPort().Port()), ch
}

// Parts no command combines, in one window on a timeline: softirq per CPU
// and kernel lock contention system-wide, both read every tick; then the
// probes are gone.
func TestSoftirqAndLocksOnATimeline(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	port, flood := floodDuring(t, 3*time.Second)
	si := NewSoftirq(SoftirqOptions{Timeline: true})
	locks := NewLocks(LockOptions{Timeline: true})
	ticks := 0
	run, err := Measure(context.Background(), Live(), Window{Duration: 2500 * time.Millisecond, Interval: time.Second,
		OnTick: func(time.Time, time.Duration) { ticks++ }}, si, locks)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-flood; err != nil {
		t.Fatal(err)
	}
	if locks.OpenErr() != nil {
		t.Fatalf("lock probe: %v", locks.OpenErr())
	}
	sev, lev := si.Evidence(), locks.Evidence()
	// Two ticks, and the window's tail (its last half second) as a third
	// interval ending with the window.
	if ticks != 2 || len(sev.Intervals) != 3 || len(lev.Intervals) != 3 {
		t.Fatalf("%d ticks: %d softirq and %d lock intervals, want 2 ticks and 3 intervals", ticks, len(sev.Intervals), len(lev.Intervals))
	}
	for i, iv := range sev.Intervals {
		if iv.NetRXPerS < 1000 || lev.Intervals[i].Count == 0 || !lev.Intervals[i].End.Equal(iv.End) {
			t.Errorf("tick %d: NET_RX %.0f/s, locks %+v (softirq at %v)", i, iv.NetRXPerS, lev.Intervals[i], iv.End)
		}
	}
	if lev.TotalNs == 0 || len(lev.Sockets) == 0 {
		t.Errorf("locks over the window: %d ns, %d sockets", lev.TotalNs, len(lev.Sockets))
	}
	// Both parts' programs are in the one overhead section.
	if run.Overhead.AttachMethod == "" || len(run.Overhead.Programs) != 5 || run.Duration() < 2*time.Second {
		t.Errorf("overhead %+v over %v", run.Overhead, run.Duration())
	}
	var text bytes.Buffer
	if err := report.Render(&text, LockResult{Evidence: lev, Run: run}.Report("test"), report.Text); err != nil ||
		!strings.Contains(text.String(), "Lock wait per interval") || !strings.Contains(text.String(), fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Errorf("locks text (%v):\n%s", err, text.String())
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// A session keeps its probes attached across windows (what a continuous
// run needs): the second window reuses the same programs, and its counts
// and costs are its own, not the first window's plus its own.
func TestSessionMeasuresWindowAfterWindow(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	si := NewSoftirq(SoftirqOptions{})
	s, err := Open(Live(), si)
	if err != nil {
		t.Fatal(err)
	}
	loaded := testutil.BPFProgramIDs(t)
	_, flood := floodDuring(t, 700*time.Millisecond)
	first, err := s.Measure(context.Background(), Window{Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-flood
	busy := si.Evidence()
	time.Sleep(300 * time.Millisecond) // the flood's tail drains
	second, err := s.Measure(context.Background(), Window{Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	quiet := si.Evidence()
	// A reload gives the programs new ids. (The count of every program on
	// the machine is no measure: another package's test may release its
	// own meanwhile.)
	for id := range testutil.BPFProgramIDs(t) {
		if !loaded[id] {
			t.Errorf("program %d appeared during the windows: probes were reloaded", id)
		}
	}
	var busyRX, quietRX uint64
	for _, c := range busy.CPUs {
		busyRX += c.Vectors["NET_RX"].Count
	}
	for _, c := range quiet.CPUs {
		quietRX += c.Vectors["NET_RX"].Count
	}
	if busyRX < 1000 || quietRX*10 > busyRX {
		t.Errorf("NET_RX: %d in the flooded window, %d in the quiet one: the second is not its own delta", busyRX, quietRX)
	}
	runs := func(r Run) (n uint64) {
		for _, p := range r.Overhead.Programs {
			n += p.RunCount
		}
		return n
	}
	if runs(first) == 0 || runs(second)*5 > runs(first) || second.Overhead.AttachNs != 0 {
		t.Errorf("program runs %d then %d (attach %d ns): costs must be per window", runs(first), runs(second), second.Overhead.AttachNs)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
