package measure_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/tcpevents"
)

type replayTCPEvents struct {
	*replay.Probe[tcpevents.Snapshot]
}

func (replayTCPEvents) ResetReason(detail uint32) string {
	if detail == 2 {
		return "NO_SOCKET"
	}
	return "NOT_SPECIFIED"
}

// tcpFixture copies the 6.18 TCP files below a root perfscope reads, with
// a process 4242 ("toyserver") that holds socket inode 1001.
func tcpFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := "../collectors/netstat/testdata/tcp618"
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(root, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc/4242/fd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("socket:[1001]", filepath.Join(root, "proc/4242/fd/3")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/4242/comm"), []byte("toyserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// bumpMIB adds n to one counter of a /proc/net MIB file ("TcpExt",
// "ListenOverflows").
func bumpMIB(t *testing.T, path, group, name string, n uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		keys, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(keys) == 0 || keys[0] != group+":" {
			continue
		}
		for j, k := range keys {
			if k == name {
				v, _ := strconv.ParseUint(vals[j], 10, 64)
				vals[j] = strconv.FormatUint(v+n, 10)
				lines[i+1] = strings.Join(vals, " ")
				if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatalf("%s has no %s %s", path, group, name)
}

func u64(v uint64) *uint64 { return &v }

// The tcp part joins the window's counters, the accept queue samples, the
// connections at both ends and the probe's events; the rules read them.
func TestTCPPartJoinsListenersConnectionsAndEvents(t *testing.T) {
	root := tcpFixture(t)
	listener := netip.MustParseAddrPort("10.0.0.1:8080")
	client := netip.MustParseAddrPort("10.0.0.2:40000")
	// The accept queue: empty, then 5 waiting of a backlog of 4 (full),
	// then 2; the SYN queue: empty, then 4 half-open (full), then 1.
	queues := []uint32{0, 5, 2}
	syns := []int{0, 4, 1}
	var listenCalls int
	diag := func(q tcpdiag.Query) ([]tcpdiag.Socket, error) {
		if q.Port != 8080 {
			t.Errorf("query port %d, want 8080", q.Port)
		}
		if q.States&tcpdiag.StatesOf(tcpdiag.Listen) != 0 {
			i := min(listenCalls, len(queues)-1)
			listenCalls++
			out := []tcpdiag.Socket{{State: tcpdiag.Listen, Local: listener, RecvQ: queues[i], SendQ: 4, Inode: 1001, Cookie: 1}}
			if q.States != tcpdiag.StatesOf(tcpdiag.Listen, tcpdiag.SynRecv) {
				return out, nil // the listeners alone
			}
			for k := range syns[i] {
				out = append(out, tcpdiag.Socket{State: tcpdiag.SynRecv, Local: listener, Remote: netip.AddrPortFrom(client.Addr(), uint16(50000+k)), Cookie: uint64(100 + k)})
			}
			// A half-open connection to another address of the port is
			// not this listener's.
			out = append(out, tcpdiag.Socket{State: tcpdiag.SynRecv, Local: netip.MustParseAddrPort("10.0.0.9:8080"), Remote: client, Cookie: 99})
			return out, nil
		}
		conn := tcpdiag.Socket{State: tcpdiag.Established, Local: listener, Remote: client, Inode: 1001, Cookie: 7,
			Info: &tcpdiag.Info{RTTUs: 250, SndCwnd: 10, BytesReceived: u64(1000), BytesAcked: u64(0)}}
		if listenCalls > 2 { // the end of the window
			conn.Info = &tcpdiag.Info{RTTUs: 300, SndCwnd: 12, BytesReceived: u64(51000), BytesAcked: u64(2000)}
		}
		return []tcpdiag.Socket{conn}, nil
	}
	key := tcpevents.Key{Local: listener, Remote: client, Event: tcpevents.Retransmit, State: uint8(tcpdiag.Established), Detail: uint32(tcpevents.KindFast)}
	var end tcpevents.Snapshot
	end.Conns = map[tcpevents.Key]tcpevents.Count{key: {Events: 3, Segs: 4}}
	end.Totals[tcpevents.Retransmit] = tcpevents.Count{Events: 3, Segs: 4}
	end.Kinds[tcpevents.KindFast] = tcpevents.Count{Events: 3, Segs: 4}
	probe := replayTCPEvents{replay.New("tcpevents", []tcpevents.Snapshot{{}, end}, replay.Recording{Method: "tp_btf"})}
	src := measure.Sources{Root: procfs.FS{Root: root}, TCPDiag: diag,
		Probes: measure.With(measure.Opener{}, &tcpevents.Spec, func(o tcpevents.Options) (measure.TCPEventsProbe, error) {
			if o.Port != 8080 {
				t.Errorf("probe port %d, want 8080", o.Port)
			}
			return probe, nil
		})}

	p := measure.NewTCP(measure.TCPOptions{Port: 8080, SampleEvery: time.Hour})
	p.SetSynBudget(1e9) // the SYN queues at every sample
	if err := p.Open(src); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	p.SampleNow() // a tick of the sampler
	bumpMIB(t, filepath.Join(root, "proc/net/netstat"), "TcpExt", "ListenOverflows", 7)
	bumpMIB(t, filepath.Join(root, "proc/net/snmp"), "Tcp", "PassiveOpens", 100)
	bumpMIB(t, filepath.Join(root, "proc/net/snmp"), "Tcp", "InSegs", 1000)
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	ev := p.Evidence(2 * time.Second)

	w := ev.Counters.Window
	if w == nil || w.ListenOverflows != 7 || w.PassiveOpens != 100 || w.InSegs != 1000 || w.RetransSegs != 0 {
		t.Fatalf("counters %+v (%s)", w, ev.Counters.Unavailable)
	}
	if ev.Settings.Somaxconn == nil || ev.Sockstat == nil {
		t.Errorf("settings %+v sockstat %+v", ev.Settings, ev.Sockstat)
	}
	if len(ev.Listeners.Rows) != 1 {
		t.Fatalf("listeners %+v", ev.Listeners)
	}
	l := ev.Listeners.Rows[0]
	if l.Local != listener || l.Backlog != 4 || l.QueuePeak != 5 || l.QueueLast != 2 || l.FullSamples != 1 || l.Samples != 3 ||
		l.Comm != "toyserver" || len(l.PIDs) != 1 || l.PIDs[0] != 4242 || l.ReusePort != 1 ||
		l.SynQueuePeak != 4 || l.SynQueueLast != 1 || l.SynFullSamples != 1 || l.SynSamples != 3 {
		t.Errorf("listener %+v", l)
	}
	c := ev.Connections
	if c.Total != 1 || len(c.Rows) != 1 || c.Rows[0].BytesWindow == nil || *c.Rows[0].BytesWindow != 52000 || c.Rows[0].RTTUs != 300 || c.Rows[0].State != "ESTABLISHED" {
		t.Fatalf("connections %+v", c)
	}
	e := ev.Events
	if e.Retransmits.Segs != 4 || e.RetransmitKinds["fast"].Segs != 4 || len(e.Top) != 1 || e.Top[0].Kind != "fast" || e.Top[0].State != "ESTABLISHED" {
		t.Errorf("events %+v", e)
	}

	var ids []string
	for _, f := range diagnose.RunTuned(diagnose.TCPRules, diagnose.TCPInput{Evidence: ev}, func(string) diagnose.Thresholds { return nil }) {
		ids = append(ids, f.ID)
		if f.ID == "tcp.accept-overflow" && !strings.Contains(strings.Join(f.Evidence, "\n"), "10.0.0.1:8080") {
			t.Errorf("accept-overflow names no listener: %q", f.Evidence)
		}
	}
	if !strings.Contains(strings.Join(ids, " "), "tcp.accept-overflow") {
		t.Errorf("findings %v, want tcp.accept-overflow", ids)
	}
}

// Without sock_diag or the probe, the sections say why and the counters
// still count.
func TestTCPPartSaysWhatItCouldNotRead(t *testing.T) {
	root := tcpFixture(t)
	p := measure.NewTCP(measure.TCPOptions{PID: 4242, SampleEvery: time.Hour})
	if err := p.Open(measure.Sources{Root: procfs.FS{Root: root}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev := p.Evidence(time.Second)
	if ev.Counters.Window == nil {
		t.Errorf("counters: %s", ev.Counters.Unavailable)
	}
	for what, s := range map[string]string{"listeners": ev.Listeners.Unavailable, "connections": ev.Connections.Unavailable, "events": ev.Events.Unavailable} {
		if s == "" {
			t.Errorf("%s: no reason given", what)
		}
	}
}

// A --pid in another network namespace than perfscope's: the TCP layer
// is read there — sock_diag is asked in /proc/PID/ns/net, the counters
// and sockstat come from /proc/PID/net — and what cannot be entered (a
// fixture's namespace link leads nowhere) says so rather than showing
// perfscope's own namespace's sysctls.
func TestTCPPartReadsThePidsNetns(t *testing.T) {
	root := tcpFixture(t)
	// perfscope in net:[1], pid 4242 in net:[2] with its own MIB files.
	if err := os.MkdirAll(filepath.Join(root, "proc/self/ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc/4242/ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink("net:[4026531840]", filepath.Join(root, "proc/self/ns/net"))
	os.Symlink("net:[4026532999]", filepath.Join(root, "proc/4242/ns/net"))
	measure.CopyTree(t, filepath.Join(root, "proc/net"), filepath.Join(root, "proc/4242/net"))
	var asked []string
	src := measure.Sources{Root: procfs.FS{Root: root}, TCPDiag: func(q tcpdiag.Query) ([]tcpdiag.Socket, error) {
		asked = append(asked, q.Netns)
		return nil, nil
	}}
	p := measure.NewTCP(measure.TCPOptions{PID: 4242, SampleEvery: time.Hour})
	if err := p.Open(src); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	// Only the pid's namespace sees overflows; perfscope's does not.
	bumpMIB(t, filepath.Join(root, "proc/4242/net/netstat"), "TcpExt", "ListenOverflows", 9)
	bumpMIB(t, filepath.Join(root, "proc/net/netstat"), "TcpExt", "ListenOverflows", 1000)
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	ev := p.Evidence(time.Second)
	if ev.Netns != "net:[4026532999]" {
		t.Errorf("netns %q", ev.Netns)
	}
	if w := ev.Counters.Window; w == nil || w.ListenOverflows != 9 {
		t.Errorf("counters %+v (%s): want the pid's namespace's 9", w, ev.Counters.Unavailable)
	}
	want := filepath.Join(root, "proc/4242/ns/net")
	if len(asked) == 0 || slices.ContainsFunc(asked, func(n string) bool { return n != want }) {
		t.Errorf("sock_diag asked in %q, want %s", asked, want)
	}
	if ev.Settings.Somaxconn != nil || !strings.Contains(ev.SettingsUnavailable, "in the network namespace of pid 4242 (net:[4026532999])") {
		t.Errorf("settings %+v, unavailable %q: perfscope's own sysctls shown as the pid's", ev.Settings, ev.SettingsUnavailable)
	}
	if ev.Sockstat == nil {
		t.Errorf("no sockstat from /proc/4242/net")
	}
}

// With a timeline, every tick closes an interval: the namespace's
// overflows, backlog drops and new connections in it, and the fullest
// accept queue of the kept listeners sampled in it; a listener of
// another process is left out with --pid; the last interval ends with the
// window and the intervals add up to the window's counters.
func TestTCPPartTimeline(t *testing.T) {
	root := tcpFixture(t)
	mine, other := netip.MustParseAddrPort("10.0.0.1:8080"), netip.MustParseAddrPort("10.0.0.1:9090")
	queue := uint32(0)
	diag := func(q tcpdiag.Query) ([]tcpdiag.Socket, error) {
		if len(q.Find) == 0 && q.States&tcpdiag.StatesOf(tcpdiag.Listen) == 0 {
			return nil, nil
		}
		// The listeners, listed with or without the SYN queues
		// (synDumpBudget spaces those reads by how long the last took) or
		// looked up one by one between listings. The other process's
		// listener is always fuller.
		return []tcpdiag.Socket{{State: tcpdiag.Listen, Local: mine, RecvQ: queue, SendQ: 4, Inode: 1001, Cookie: 1},
			{State: tcpdiag.Listen, Local: other, RecvQ: 50, SendQ: 64, Inode: 2002, Cookie: 2}}, nil
	}
	src := measure.Sources{Root: procfs.FS{Root: root}, TCPDiag: diag}
	p := measure.NewTCP(measure.TCPOptions{PID: 4242, SampleEvery: time.Hour, Timeline: true})
	if err := p.Open(src); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	netstat, snmp := filepath.Join(root, "proc/net/netstat"), filepath.Join(root, "proc/net/snmp")
	// Interval 1: quiet, 100 connections. Interval 2 (the pause): the
	// queue fills (5 of 4), 30 refused, 2 backlog drops. Interval 3, the
	// window's tail: drained, 50 connections.
	bumpMIB(t, snmp, "Tcp", "PassiveOpens", 100)
	p.SampleNow()
	p.Tick(ctx, t0.Add(time.Second))
	queue = 5
	p.SampleNow()
	bumpMIB(t, netstat, "TcpExt", "ListenOverflows", 30)
	bumpMIB(t, netstat, "TcpExt", "ListenDrops", 30)
	bumpMIB(t, netstat, "TcpExt", "TCPBacklogDrop", 2)
	p.Tick(ctx, t0.Add(2*time.Second))
	queue = 0
	bumpMIB(t, snmp, "Tcp", "PassiveOpens", 50)
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	p.Tail(t0.Add(2500 * time.Millisecond))
	ev := p.Evidence(2500 * time.Millisecond)
	iv := ev.Intervals
	if len(iv) != 3 {
		t.Fatalf("%d intervals, want 3: %+v", len(iv), iv)
	}
	type row struct {
		overflows, drops, backlogDrops, opens uint64
		peak, backlog                         uint32
		full                                  int
	}
	want := []row{{0, 0, 0, 100, 0, 4, 0}, {30, 30, 2, 0, 5, 4, 1}, {0, 0, 0, 50, 0, 4, 0}}
	for i, w := range want {
		x := iv[i]
		if x.ListenOverflows == nil || x.PassiveOpens == nil {
			t.Fatalf("interval %d has no counters: %+v", i, x)
		}
		got := row{*x.ListenOverflows, *x.ListenDrops, *x.BacklogDrops, *x.PassiveOpens, x.QueuePeak, x.Backlog, x.FullSamples}
		if got != w {
			t.Errorf("interval %d: %+v, want %+v", i, got, w)
		}
	}
	if !iv[2].End.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("the last interval ends %v", iv[2].End)
	}
	if w := ev.Counters.Window; w == nil || w.ListenOverflows != 30 || w.PassiveOpens != 150 {
		t.Errorf("window counters %+v", w)
	}
}

// Window after window on one part (perfscope serve), the counters of
// consecutive windows add up to the kernel's: what it counted between
// one window's end and the next one's start goes to the next.
func TestTCPPartWindowsAddUp(t *testing.T) {
	root := tcpFixture(t)
	var resets uint64 // the probe's cumulative count of resets sent
	probe := countingEvents{replayTCPEvents{replay.New("tcpevents", []tcpevents.Snapshot{{}}, replay.Recording{Method: "tp_btf"})}, &resets}
	src := measure.Sources{Root: procfs.FS{Root: root}, TCPDiag: func(tcpdiag.Query) ([]tcpdiag.Socket, error) { return nil, nil },
		Probes: measure.With(measure.Opener{}, &tcpevents.Spec, func(tcpevents.Options) (measure.TCPEventsProbe, error) { return probe, nil })}
	p := measure.NewTCP(measure.TCPOptions{SampleEvery: time.Hour})
	if err := p.Open(src); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	netstat := filepath.Join(root, "proc/net/netstat")
	var sum, resetSum uint64
	for _, n := range []uint64{3, 5} {
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		bumpMIB(t, netstat, "TcpExt", "ListenOverflows", n)
		resets += n
		if err := p.End(ctx); err != nil {
			t.Fatal(err)
		}
		ev := p.Evidence(time.Second)
		sum += ev.Counters.Window.ListenOverflows
		resetSum += ev.Events.ResetsSent.Events
		// Between the windows: the serve loop judging and rendering.
		bumpMIB(t, netstat, "TcpExt", "ListenOverflows", 100)
		resets += 100
	}
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	ev := p.Evidence(time.Second)
	sum += ev.Counters.Window.ListenOverflows
	resetSum += ev.Events.ResetsSent.Events
	if sum != 208 || resetSum != 208 {
		t.Errorf("three windows counted %d overflows and %d resets sent, the kernel and the probe 208", sum, resetSum)
	}
}

// countingEvents is a tcpevents probe whose resets sent the test counts.
type countingEvents struct {
	replayTCPEvents
	resets *uint64
}

func (c countingEvents) Snapshot() (tcpevents.Snapshot, error) {
	var s tcpevents.Snapshot
	s.Totals[tcpevents.ResetSent] = tcpevents.Count{Events: *c.resets}
	return s, nil
}

// The SYN queues are read only as often as their cost allows (a walk of
// every connection of the namespace): with a budget no read fits in, the
// first sample reads them and the rest read the listeners alone, and the
// listener says how many of its samples saw its SYN queue.
func TestTCPSpacesTheSYNQueueReads(t *testing.T) {
	root := tcpFixture(t)
	listener := netip.MustParseAddrPort("10.0.0.1:8080")
	var synReads, listenReads, finds int
	diag := func(q tcpdiag.Query) ([]tcpdiag.Socket, error) {
		if len(q.Find) > 0 {
			finds++
			if len(q.Find) != 1 || q.Find[0].Cookie != 1 {
				t.Errorf("looked up %+v, want the listener the listing found", q.Find)
			}
			return []tcpdiag.Socket{{State: tcpdiag.Listen, Local: listener, RecvQ: 1, SendQ: 4, Inode: 1001, Cookie: 1}}, nil
		}
		if q.States&tcpdiag.StatesOf(tcpdiag.Listen) == 0 {
			return nil, nil // the connections at both ends
		}
		listenReads++
		out := []tcpdiag.Socket{{State: tcpdiag.Listen, Local: listener, RecvQ: 1, SendQ: 4, Inode: 1001, Cookie: 1}}
		if q.States&tcpdiag.StatesOf(tcpdiag.SynRecv) != 0 {
			synReads++
			out = append(out, tcpdiag.Socket{State: tcpdiag.SynRecv, Local: listener, Remote: netip.MustParseAddrPort("10.0.0.2:50000"), Cookie: 100})
		}
		return out, nil
	}
	p := measure.NewTCP(measure.TCPOptions{Port: 8080, SampleEvery: time.Hour})
	p.SetSynBudget(1e-12)
	if err := p.Open(measure.Sources{Root: procfs.FS{Root: root}, TCPDiag: diag}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	p.SampleNow()
	p.SampleNow()
	if err := p.End(ctx); err != nil {
		t.Fatal(err)
	}
	rows := p.Evidence(time.Second).Listeners.Rows
	if len(rows) != 1 || rows[0].Samples != 4 || rows[0].SynSamples != 1 || rows[0].SynQueuePeak != 1 || synReads != 1 || listenReads != 1 || finds != 3 {
		t.Errorf("listeners %+v; %d listings, %d of them of the SYN queues, %d lookups: want 4 samples, 1 listing with the SYN queue and the listener looked up alone in the other 3",
			rows, listenReads, synReads, finds)
	}
}

// Which listeners a sample looks up one by one instead of listing them:
// every listener when each is alone on its family, address and port and
// there are not too many; none when an SO_REUSEPORT group shares one (the
// lookup would find only one of the group).
func TestFindableListeners(t *testing.T) {
	l := func(addr string, cookie uint64) tcpdiag.Socket {
		return tcpdiag.Socket{Family: 2, State: tcpdiag.Listen, Local: netip.MustParseAddrPort(addr), Cookie: cookie}
	}
	syn := tcpdiag.Socket{Family: 2, State: tcpdiag.SynRecv, Local: netip.MustParseAddrPort("10.0.0.1:80"), Cookie: 9}
	if got := measure.FindableListeners([]tcpdiag.Socket{l("10.0.0.1:80", 1), syn, l("10.0.0.1:443", 2)}); len(got) != 2 {
		t.Errorf("two listeners alone: %+v", got)
	}
	v6 := l("[::]:80", 3)
	v6.Family = 10
	if got := measure.FindableListeners([]tcpdiag.Socket{l("0.0.0.0:80", 1), v6}); len(got) != 2 {
		t.Errorf("one listener per family on the same port: %+v", got)
	}
	if got := measure.FindableListeners([]tcpdiag.Socket{l("10.0.0.1:80", 1), l("10.0.0.1:80", 2)}); got != nil {
		t.Errorf("an SO_REUSEPORT group: %+v, want none looked up", got)
	}
	var many []tcpdiag.Socket
	for i := range 65 {
		many = append(many, l(fmt.Sprintf("10.0.0.1:%d", 1000+i), uint64(i)))
	}
	if got := measure.FindableListeners(many); got != nil {
		t.Errorf("65 listeners: %d looked up, want a listing", len(got))
	}
}
