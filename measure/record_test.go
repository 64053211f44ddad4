package measure_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// recordedFiles are the /proc and /sys files a network run reads at both
// ends of its window.
var recordedFiles = []string{
	"proc/softirqs", "proc/stat", "proc/interrupts", "proc/net/udp", "proc/net/udp6",
	"proc/net/snmp", "proc/net/snmp6", "proc/net/softnet_stat", "proc/net/sockstat", "sys/devices/system/cpu/online",
}

const netFixture = "testdata/net-lo-flood"

// TestRecordNetFixture re-records testdata/net-lo-flood: `perfscope udp
// --iface lo --port P` over one second of a two-sender loopback flood into
// one socket, the probes' snapshots (probes.json) and the /proc files the
// run read at the start and the end of its window (start/, end/), plus
// what naming the stacks and sockets needs (kallsyms lines of the recorded
// addresses, the socket's owner). Run it as root with PERFSCOPE_RECORD=1,
// then `go test ./measure ./recipes -update` to rewrite the replay.Golden evidence.
func TestRecordNetFixture(t *testing.T) {
	if os.Getenv("PERFSCOPE_RECORD") == "" {
		t.Skip("set PERFSCOPE_RECORD=1 (as root) to re-record " + netFixture)
	}
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	if err := os.RemoveAll(netFixture); err != nil {
		t.Fatal(err)
	}
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	port := int(sink.AddrPort().Port())

	src := measure.Live()
	iface, err := measure.ResolveInterface(src, "lo")
	if err != nil {
		t.Fatal(err)
	}
	rec := replay.Recording{Iface: iface, Port: port, Frequency: 199, DropReasons: map[string]string{},
		How: fmt.Sprintf("measure.TestRecordNetFixture on %s: perfscope udp --iface lo --port %d, 1 s window of a 2-sender loopback flood into one socket", kernelRelease(), port)}
	phase := 0
	copyPhase := func() {
		dir := []string{"start", "end"}[min(phase, 1)]
		phase++
		for _, f := range recordedFiles {
			copyFile(t, "/"+f, filepath.Join(netFixture, dir, f))
		}
	}
	live := measure.LiveProbes()
	var queue measure.QueueProbe
	var drop measure.DropProbe
	var prof measure.CPUProfileProbe
	o := measure.With(live, &softirq.Spec, func(o softirq.Options) (measure.SoftirqProbe, error) {
		p, err := measure.OpenProbe[measure.SoftirqProbe](live, &softirq.Spec, o)
		if err != nil {
			return nil, err
		}
		rec.Method = string(p.Method())
		return recorded[softirq.Snapshot]{p, &rec.Softirq, copyPhase}, nil
	})
	o = measure.With(o, &netqueue.Spec, func(o netqueue.Options) (measure.QueueProbe, error) {
		p, err := measure.OpenProbe[measure.QueueProbe](live, &netqueue.Spec, o)
		if err != nil {
			return nil, err
		}
		queue = p
		rec.NoNAPI = p.NoNAPI()
		return recQueue{p, &rec.Queue}, nil
	})
	o = measure.With(o, &lockstat.Spec, func(o lockstat.Options) (measure.LockProbe, error) {
		p, err := measure.OpenProbe[measure.LockProbe](live, &lockstat.Spec, o)
		if err != nil {
			return nil, err
		}
		return recorded[lockstat.Snapshot]{p, &rec.Lock, nil}, nil
	})
	o = measure.With(o, &udpdrop.Spec, func(o udpdrop.Options) (measure.DropProbe, error) {
		p, err := measure.OpenProbe[measure.DropProbe](live, &udpdrop.Spec, o)
		if err != nil {
			return nil, err
		}
		drop = p
		return recDrop{p, &rec.Drop}, nil
	})
	o = measure.With(o, &udpsock.Spec, func(o udpsock.Options) (measure.SocketProbe, error) {
		p, err := measure.OpenProbe[measure.SocketProbe](live, &udpsock.Spec, o)
		if err != nil {
			return nil, err
		}
		return recorded[udpsock.Snapshot]{p, &rec.Socket, nil}, nil
	})
	src.Probes = measure.With(o, &cpuprofile.Spec, func(o cpuprofile.Options) (measure.CPUProfileProbe, error) {
		p, err := measure.OpenProbe[measure.CPUProfileProbe](live, &cpuprofile.Spec, o)
		if err != nil {
			return nil, err
		}
		prof = p
		rec.ProfileOptions = &o
		return recProfile{p, &rec.CPUProfile}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := measure.NewNetParts(measure.NetOptions{Iface: iface, Port: port}, lockstat.DefaultStackEvery, rec.Frequency)
	s, err := measure.Open(src, n.List()...)
	if err != nil {
		t.Fatal(err)
	}
	// The flood runs across the whole window: started once the probes
	// are attached, stopped after the last reading.
	floodCtx, stopFlood := context.WithCancel(ctx)
	flood := make(chan error, 1)
	go func() {
		_, err := udpflood.Send(floodCtx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: 10 * time.Second, MaxPackets: 20_000_000})
		flood <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := s.Measure(ctx, measure.Window{Duration: time.Second, Stats: measure.StatsSampled}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	rec.CPUs = prof.CPUs()
	if queue != nil {
		rec.QueueMissing = map[string]string{}
		for hook, why := range queue.Missing() {
			rec.QueueMissing[hook] = why.Error()
		}
	}
	for _, d := range rec.Drop {
		for k := range d.Ports {
			rec.DropReasons[fmt.Sprintf("%d/%d", k.Kind, k.Reason)] = drop.ReasonName(k.Kind, k.Reason)
		}
		for r := range d.Reasons {
			rec.DropReasons[fmt.Sprintf("%d/%d", udpdrop.KfreeSkb, r)] = drop.ReasonName(udpdrop.KfreeSkb, r)
		}
	}
	stopFlood()
	s.Close()
	<-flood
	if d := rec.Softirq[1].Sub(rec.Softirq[0]); d.PerCPU[0][softirq.NetRX].Count+d.PerCPU[len(d.PerCPU)-1][softirq.NetRX].Count < 1000 {
		t.Fatalf("the flood did not run in the window: NET_RX %+v", d.PerCPU)
	}

	// User stacks would need every sampled binary; the kernel's are what
	// the network report reads.
	for i := range rec.CPUProfile {
		for j := range rec.CPUProfile[i].Samples {
			rec.CPUProfile[i].Samples[j].UserStack = nil
		}
	}
	writeKallsymsFor(t, filepath.Join(netFixture, "end/proc/kallsyms"), rec)
	writeSocketOwner(t, filepath.Join(netFixture, "end"), port)
	mkdir(t, filepath.Join(netFixture, "ethtool/lo"))
	replay.WriteFile(t, filepath.Join(netFixture, "ethtool/lo/README"), "lo has no ethtool statistics: every request is \"not supported\"\n")
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	replay.WriteFile(t, filepath.Join(netFixture, "probes.json"), string(b)+"\n")
}

// recorded is a live probe whose snapshots are kept for the fixture;
// after, when set, runs once each snapshot is taken.
type recorded[S any] struct {
	probes.Snapshotter[S]
	out   *[]S
	after func()
}

func (r recorded[S]) Snapshot() (S, error) { return record(r.Snapshotter.Snapshot, r.out, r.after) }

func record[S any](snapshot func() (S, error), out *[]S, after func()) (S, error) {
	s, err := snapshot()
	if err == nil {
		*out = append(*out, s)
		if after != nil {
			after()
		}
	}
	return s, err
}

// The probes with more than a snapshot, recorded.
type (
	recQueue struct {
		measure.QueueProbe
		out *[]netqueue.Snapshot
	}
	recDrop struct {
		measure.DropProbe
		out *[]udpdrop.Snapshot
	}
	recProfile struct {
		measure.CPUProfileProbe
		out *[]cpuprofile.Profile
	}
)

func (r recQueue) Snapshot() (netqueue.Snapshot, error) {
	return record(r.QueueProbe.Snapshot, r.out, nil)
}
func (r recDrop) Snapshot() (udpdrop.Snapshot, error) {
	return record(r.DropProbe.Snapshot, r.out, nil)
}
func (r recProfile) Snapshot() (cpuprofile.Profile, error) {
	return record(r.CPUProfileProbe.Snapshot, r.out, nil)
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	replay.WriteFile(t, to, string(b))
}

// writeKallsymsFor keeps the kallsyms lines that name the recorded
// stacks: for each address, the text symbol at or below it (what
// symbols.KernelSymbols resolves it to in the whole file too).
func writeKallsymsFor(t *testing.T, path string, rec replay.Recording) {
	t.Helper()
	want := map[uint64]bool{}
	for _, l := range rec.Lock {
		for _, st := range l.Stacks {
			for _, a := range st {
				want[a] = true
			}
		}
	}
	for _, p := range rec.CPUProfile {
		for _, s := range p.Samples {
			for _, a := range s.KernelStack {
				want[a] = true
				want[a-1] = true // cpuprofile.Frames looks up call sites
			}
		}
	}
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type line struct {
		addr uint64
		text string
	}
	var lines []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || !strings.Contains("tTwW", fs[1]) {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err == nil {
			lines = append(lines, line{a, sc.Text()})
		}
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].addr < lines[j].addr })
	keep := map[int]bool{}
	for a := range want {
		if i := sort.Search(len(lines), func(i int) bool { return lines[i].addr > a }) - 1; i >= 0 {
			keep[i] = true
		}
	}
	var out strings.Builder
	for i, l := range lines {
		if keep[i] {
			out.WriteString(l.text + "\n")
		}
	}
	replay.WriteFile(t, path, out.String())
}

// writeSocketOwner records the flood's socket as /proc shows its owner:
// this process's fd link and comm, and this process's network namespace.
func writeSocketOwner(t *testing.T, root string, port int) {
	t.Helper()
	table, err := sockets.Default.UDP()
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, s := range table.OnPort(uint16(port)) {
		inodes[fmt.Sprintf("socket:[%d]", s.Inode)] = true
	}
	pid := os.Getpid()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && inodes[link] {
			mkdir(t, filepath.Join(root, fmt.Sprintf("proc/%d/fd", pid)))
			if err := os.Symlink(link, filepath.Join(root, fmt.Sprintf("proc/%d/fd/%s", pid, fd.Name()))); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyFile(t, "/proc/self/comm", filepath.Join(root, fmt.Sprintf("proc/%d/comm", pid)))
	netns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(root, "proc/self/ns"))
	if err := os.Symlink(netns, filepath.Join(root, "proc/self/ns/net")); err != nil {
		t.Fatal(err)
	}
}
