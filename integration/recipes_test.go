package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/jvmapp"
	"github.com/perfscope/perfscope/lab/udpflood"
)

// recipeReport is the envelope of `perfscope recipe run -o json`; Data is
// decoded by each test into what its recipe reports.
type recipeReport struct {
	Command string `json:"command"`
	Meta    struct {
		CPUs       int   `json:"cpus"`
		DurationNs int64 `json:"duration_ns"`
	} `json:"meta"`
	Data   json.RawMessage `json:"data"`
	Recipe struct {
		Name       string            `json:"name"`
		Source     string            `json:"source"`
		Parameters map[string]string `json:"parameters"`
	} `json:"recipe"`
	Findings []struct {
		ID       string   `json:"id"`
		Severity string   `json:"severity"`
		Title    string   `json:"title"`
		Evidence []string `json:"evidence"`
	} `json:"findings"`
	Overhead  *evidence.Overhead `json:"overhead"`
	Artifacts []struct {
		Kind string `json:"kind"`
		Path string `json:"path"`
	} `json:"artifacts"`
}

// recipeData is the data of a recipe with several sections.
type recipeData struct {
	Net *struct {
		evidence.NetEvidence
	} `json:"net"`
	Softirq   *evidence.SoftirqEvidence `json:"softirq"`
	Locks     *evidence.LockSection     `json:"locks"`
	JVMPauses *evidence.JVMPauses       `json:"jvm_pauses"`
	JVM       *evidence.JVM             `json:"jvm"`
	GC        *evidence.GC              `json:"gc"`
	Timeline  *evidence.Timeline        `json:"timeline"`
}

// runRecipe runs `perfscope recipe run ARGS -o json` and decodes the report.
func runRecipe(t *testing.T, args ...string) (recipeReport, string) {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), append(append([]string{"recipe", "run"}, args...), "-o", "json")...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perfscope recipe run %v: %v\n%s", args, err, stderr.String())
	}
	var r recipeReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	return r, stderr.String()
}

func decodeData(t *testing.T, r recipeReport, into any) {
	t.Helper()
	if err := json.Unmarshal(r.Data, into); err != nil {
		t.Fatalf("data: %v\n%s", err, r.Data)
	}
}

// loopbackFlood floods one loopback socket from two senders for d (rate
// 0: as fast as they can).
func loopbackFlood(t *testing.T, d time.Duration, rate int) int {
	t.Helper()
	Perfscope(t) // built before the flood starts, not during it
	sink, err := udpflood.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		udpflood.Send(ctx, udpflood.Config{Target: sink.AddrPort(), Senders: 2, Duration: d, MaxPackets: 20_000_000, Rate: rate})
	}()
	t.Cleanup(func() { cancel(); <-done; sink.Close() })
	time.Sleep(300 * time.Millisecond) // a steady rate before the window
	return int(sink.AddrPort().Port())
}

func findingIDs(r recipeReport) []string {
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

// Only the families a recipe chose may find anything.
func onlyFamilies(t *testing.T, r recipeReport, families ...string) {
	t.Helper()
	for _, id := range findingIDs(r) {
		fam, _, _ := strings.Cut(id, ".")
		ok := false
		for _, f := range families {
			ok = ok || f == fam || f == id
		}
		if !ok {
			t.Errorf("finding %s is not one %s chose (%v)", id, r.Recipe.Name, families)
		}
	}
}

// udp-rx on loopback under a flood: the network section of `perfscope udp`.
func TestRecipeUDPRx(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	port := loopbackFlood(t, 5*time.Second, 0)
	r, _ := runRecipe(t, "udp-rx", "--set", "iface=lo", "--set", fmt.Sprintf("port=%d", port), "--set", "duration=2s", "--set", "profile=false")
	var d evidence.NetEvidence
	decodeData(t, r, &d)
	if r.Command != "recipe" || r.Recipe.Name != "udp-rx" || r.Recipe.Source != "builtin" || r.Recipe.Parameters["port"] != strconv.Itoa(port) {
		t.Errorf("envelope %s %+v", r.Command, r.Recipe)
	}
	if d.Interface.Name != "lo" || d.Port != port || len(d.Softirq.NetRXCPUs()) == 0 || len(d.Sockets.Sockets) == 0 || d.Sockets.Sockets[0].Port != port {
		t.Errorf("net section: iface %q port %d NET_RX CPUs %v sockets %+v", d.Interface.Name, d.Port, d.Softirq.NetRXCPUs(), d.Sockets.Sockets)
	}
	if d.Profile.Unavailable != "on-CPU profile: disabled (profile=false)" {
		t.Errorf("profile section: %q", d.Profile.Unavailable)
	}
	onlyFamilies(t, r, "net")
}

// udp-tx on loopback: lo transmits every datagram on TX queue 0, and the
// timeline joins softirq, locks and the queue's packets per second.
func TestRecipeUDPTx(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	loopbackFlood(t, 5*time.Second, 0)
	// --exact: the timeline's rows must add up to the window exactly, which
	// sampled counts, scaled interval by interval, only approach.
	r, _ := runRecipe(t, "udp-tx", "--exact", "--set", "iface=lo", "--set", "duration=2s", "--set", "interval=1s")
	var d recipeData
	decodeData(t, r, &d)
	if d.Net == nil || d.Timeline == nil {
		t.Fatalf("sections: %s", r.Data)
	}
	tx := d.Net.Queues.TX
	if len(tx) != 1 || tx[0].KernelPackets == nil || *tx[0].KernelPackets < 1000 {
		t.Errorf("TX queues %+v", tx)
	}
	if len(d.Timeline.Rows) != 2 {
		t.Fatalf("timeline rows %d, want 2", len(d.Timeline.Rows))
	}
	var sum uint64
	for _, row := range d.Timeline.Rows {
		if row.TXPackets == nil || row.LockWaitNs == nil || row.NetRXPerS == nil {
			t.Fatalf("row without the queue, lock or softirq column: %+v", row)
		}
		sum += *row.TXPackets
	}
	// The rows add up to the window's count (the counts are the probe's).
	if sum != *tx[0].KernelPackets {
		t.Errorf("timeline TX %d, window TX %d", sum, *tx[0].KernelPackets)
	}
	onlyFamilies(t, r, "net.xps-unset", "locks.contended")
}

// softirq-balance: the interval rows and the probe's agreement with
// /proc/softirqs, the rule's finding only when one CPU carries NET_RX.
func TestRecipeSoftirqBalance(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	loopbackFlood(t, 5*time.Second, 0)
	// --exact: the probe must agree with /proc/softirqs run for run.
	r, _ := runRecipe(t, "softirq-balance", "--exact", "--set", "duration=2s", "--set", "interval=1s")
	var d evidence.SoftirqEvidence
	decodeData(t, r, &d)
	if len(d.Intervals) != 2 {
		t.Errorf("%d intervals, want 2", len(d.Intervals))
	}
	for _, a := range d.Totals {
		if a.Vector == "NET_RX" && (a.Probe < 1000 || a.Diff > 0.03 || a.Diff < -0.03) {
			t.Errorf("NET_RX probe %d vs /proc %d", a.Probe, a.ProcCount)
		}
	}
	onlyFamilies(t, r, "net.softirq-concentrated")
}

// lock-contention system-wide: the flood's socket lock is among the
// contended, and the rule fires exactly when the wait passes its share.
func TestRecipeLockContention(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	port := loopbackFlood(t, 5*time.Second, 0)
	r, _ := runRecipe(t, "lock-contention", "--set", "duration=2s", "--set", "stacks_every=1")
	var d evidence.LockSection
	decodeData(t, r, &d)
	found := false
	for _, s := range d.Sockets {
		found = found || s.Socket.Port == port
	}
	if d.TotalNs == 0 || len(d.Sites) == 0 || !found {
		t.Fatalf("locks: %d ns, %d sites, sockets %+v (flood port %d)", d.TotalNs, len(d.Sites), d.Sockets, port)
	}
	share := float64(d.TotalNs) / float64(r.Meta.DurationNs) / float64(r.Meta.CPUs)
	t.Logf("lock wait %d ns, %.2f%% of CPU time; findings %v", d.TotalNs, share*100, findingIDs(r))
	if fired := len(r.Findings) == 1 && r.Findings[0].ID == "locks.contended"; fired != (share >= 0.01) {
		t.Errorf("lock wait %.2f%% of CPU time, locks.contended %v", share*100, fired)
	}
	onlyFamilies(t, r, "locks")
}

// cpu-profile: the spinner's function on top, and the recipe's outputs.
func TestRecipeCPUProfile(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	spinner := testutil.StartSpinner(t, 3)
	time.Sleep(100 * time.Millisecond)
	out := filepath.Join(t.TempDir(), "out")
	r, _ := runRecipe(t, "cpu-profile", "--set", fmt.Sprintf("pid=%d", spinner.Process.Pid), "--set", "duration=1s", "--set", "freq=199", "--set", "out="+out)
	var d evidence.Profile
	decodeData(t, r, &d)
	if len(d.TopFunctions) == 0 || d.TopFunctions[0].Function != testutil.SpinFunction {
		t.Fatalf("top functions %+v", d.TopFunctions)
	}
	if len(r.Artifacts) != 2 || r.Artifacts[0].Path != filepath.Join(out, "cpu.svg") || r.Artifacts[1].Kind != "folded" {
		t.Fatalf("artifacts %+v", r.Artifacts)
	}
	if svg := readFile(t, filepath.Join(out, "cpu.svg")); !strings.Contains(svg, testutil.SpinFunction) {
		t.Error("cpu.svg does not name the spinner's function")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A recipe no command has: softirq per CPU and lock contention
// system-wide, on a 1 s timeline, from a file the user wrote.
func TestUserRecipeSoftirqAndLocks(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "softirq-locks.yaml")
	os.WriteFile(file, []byte(`version: 1
name: softirq-locks
description: Softirq per CPU and kernel lock contention system-wide, on a 1 s timeline.
parameters:
  duration: {type: duration, default: 3s}
  every: {type: int, default: 4, min: 1}
probes:
  - softirq
  - lockstat:
      stacks_every: ${every}
window:
  duration: ${duration}
  interval: 1s
`), 0o644)
	var out, stderr bytes.Buffer
	cmd := exec.Command(Perfscope(t), "recipe", "validate", file)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || out.String() != file+": ok (recipe softirq-locks)\n" {
		t.Fatalf("validate: %v %q %q", err, out.String(), stderr.String())
	}
	port := loopbackFlood(t, 5*time.Second, 0)
	// --exact: the rows must add up to the window (see udp-tx above).
	r, _ := runRecipe(t, file, "--exact", "--set", "duration=2500ms")
	var d recipeData
	decodeData(t, r, &d)
	if r.Recipe.Source != file || d.Softirq == nil || d.Locks == nil || d.Timeline == nil || d.Net != nil {
		t.Fatalf("recipe %+v, data %s", r.Recipe, r.Data)
	}
	// Two ticks and the window's last half second.
	if len(d.Timeline.Rows) != 3 || len(d.Softirq.Intervals) != 3 || len(d.Locks.Intervals) != 3 {
		t.Fatalf("rows %d, softirq intervals %d, lock intervals %d", len(d.Timeline.Rows), len(d.Softirq.Intervals), len(d.Locks.Intervals))
	}
	var wait uint64
	for i, row := range d.Timeline.Rows {
		if row.NetRXPerS == nil || *row.NetRXPerS < 1000 || row.LockWaitNs == nil || !row.End.Equal(d.Locks.Intervals[i].End) {
			t.Errorf("row %d: %+v", i, row)
			continue
		}
		wait += *row.LockWaitNs
	}
	if wait != d.Locks.TotalNs {
		t.Errorf("the rows' lock wait %d ≠ the window's %d", wait, d.Locks.TotalNs)
	}
	found := false
	for _, s := range d.Locks.Sockets {
		found = found || s.Socket.Port == port
	}
	if !found {
		t.Errorf("the flood's socket is not among the contended: %+v", d.Locks.Sockets)
	}
	if r.Overhead == nil || len(r.Overhead.Programs) != 5 {
		t.Errorf("one overhead for both probes: %+v", r.Overhead)
	}
	// A broken copy: one sentence per error, file and line, exit 2.
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte(strings.Replace(readFile(t, file), "${every}", "eight", 1)), 0o644)
	out.Reset()
	cmd = exec.Command(Perfscope(t), "recipe", "validate", broken)
	cmd.Stdout = &out
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || out.String() != broken+`:10: probes[1].lockstat.stacks_every: want an integer 1–1024, got "eight"`+"\n" {
		t.Errorf("validate broken: %v %q", err, out.String())
	}
}

// jvm-net: the sample UDP receiver, a paced loopback flood at 10k
// datagrams/s through a 64 KiB buffer, and a full GC in the middle of the
// window. The finding joins the two timelines: the drops of the interval
// the JVM was stopped, and how long it was stopped, both as the rows say.
func TestRecipeJVMNet(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-udpsink-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Serial GC: one thread collects 4M live objects, a pause of
	// 100-600 ms on this machine.
	sink, err := jdk.StartUDPSink(context.Background(), jvmapp.UDPSinkConfig{ClassDir: dir, RcvBuf: 64 << 10, LiveObjects: 4_000_000,
		JVMArgs: []string{"-XX:+UseSerialGC", "-Xms512m", "-Xmx512m"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Stop)
	target := fmt.Sprintf("127.0.0.1:%d", sink.Port)
	ctx, cancel := context.WithCancel(context.Background())
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		udpflood.Send(ctx, udpflood.Config{Target: mustAddrPort(t, target), Senders: 1, Duration: 10 * time.Second, MaxPackets: 200_000, Rate: 10000})
	}()
	t.Cleanup(func() { cancel(); <-floodDone })
	time.Sleep(500 * time.Millisecond)
	go func() {
		// The pause, well inside the window.
		time.Sleep(3200 * time.Millisecond)
		if c, err := net.Dial("udp", target); err == nil {
			c.Write([]byte("gc"))
			c.Close()
		}
	}()
	r, _ := runRecipe(t, "jvm-net", "--set", fmt.Sprintf("pid=%d", sink.PID), "--set", fmt.Sprintf("port=%d", sink.Port), "--set", "duration=6s")
	var d recipeData
	decodeData(t, r, &d)
	if d.Net == nil || d.JVMPauses == nil || d.Timeline == nil || d.Timeline.Port != sink.Port || d.Timeline.PID != sink.PID {
		t.Fatalf("sections: %s", r.Data)
	}
	var stopped int64
	var peak float64
	for _, row := range d.Timeline.Rows {
		t.Logf("%s drops %v read %v queue %v GCs %v stopped %v", row.End.Format("15:04:05.000"), orDash(row.Drops), orDash(row.Datagrams), orDash(row.SocketQueueBytes), orDash(row.JVMGCs), orDash(row.JVMStoppedNs))
		if s := row.StoppedNs(); s != nil && *s >= 50e6 {
			stopped = *s
			peak = max(peak, *row.DropsPerS)
			if prev := rowBefore(d.Timeline.Rows, row); prev != nil && *prev.JVMGCs > 0 {
				peak = max(peak, *prev.DropsPerS)
			}
		}
	}
	if stopped == 0 || d.JVMPauses.OldGCs == 0 {
		t.Fatalf("no pause of 50 ms in the timeline (old GCs %d)", d.JVMPauses.OldGCs)
	}
	var f *struct {
		ID       string   `json:"id"`
		Severity string   `json:"severity"`
		Title    string   `json:"title"`
		Evidence []string `json:"evidence"`
	}
	for i := range r.Findings {
		if r.Findings[i].ID == "jvm-net.drops-during-pause" {
			f = &r.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no jvm-net.drops-during-pause finding: %v", findingIDs(r))
	}
	t.Logf("%s [%s] %s\n%s", f.ID, f.Severity, f.Title, strings.Join(f.Evidence, "\n"))
	want := fmt.Sprintf("drops on UDP port %d rose to %s/s in the interval the JVM (pid %d) was stopped for %v",
		sink.Port, rateText(peak), sink.PID, time.Duration(stopped).Round(time.Millisecond))
	if f.Title != want {
		t.Errorf("title %q\nwant  %q", f.Title, want)
	}
	onlyFamilies(t, r, "jvm-net", "net.udp-rcvbuf")
}

func orDash[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}

func rowBefore(rows []evidence.TimelineRow, row evidence.TimelineRow) *evidence.TimelineRow {
	for i := 1; i < len(rows); i++ {
		if rows[i].End.Equal(row.End) {
			return &rows[i-1]
		}
	}
	return nil
}

// rateText prints a rate as the finding does.
func rateText(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// jvm-alloc on the sample service: bytes per request from a fixed-count
// load perfscope drives, the jvm rules only.
func TestRecipeJVMAlloc(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t) // the passive request count loads BPF programs
	app := startSample(t, nil)
	warmUp(t, app, "/alloc?kb=64")
	r, _ := runRecipe(t, "jvm-alloc", "--set", fmt.Sprintf("pid=%d", app.PID), "--set", "load="+app.URL("/alloc?kb=64"), "--set", "requests=2000")
	var d recipeData
	decodeData(t, r, &d)
	if d.JVM == nil || d.JVM.Requests == nil || *d.JVM.Requests != 2000 || d.JVM.RequestsSource != "load" {
		t.Fatalf("jvm section %s", r.Data)
	}
	// 64 KiB the handler allocates, plus the JDK HTTP server's own per
	// request (30–35 KiB since samples are weighed by their sizes from
	// the JFR recording, unbiased) and the sampling error.
	if bpr := deref(d.JVM.BytesPerRequest); !(bpr >= 64<<10 && bpr <= 128<<10) {
		t.Errorf("bytes per request %.0f, want 64-128 KiB", bpr)
	}
	if r.Overhead == nil || r.Overhead.AttachMethod != "hotspot-attach+async-profiler" {
		t.Errorf("overhead %+v", r.Overhead)
	}
	onlyFamilies(t, r, "jvm")
}

// gc-pressure on the sample service writing a GC log: the allocation
// profile, the GC counters interval by interval, and the log, side by side.
func TestRecipeGCPressure(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t) // the passive request count loads BPF programs
	logDir, err := os.MkdirTemp("/var/tmp", "perfscope-gclog-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(logDir) })
	os.Chmod(logDir, 0o777)
	gcLog := filepath.Join(logDir, "gc.log")
	app := startSample(t, []string{"-Xlog:gc*:file=" + gcLog})
	// 256 KiB a request for the whole window: young collections inside it.
	ctx, cancel := context.WithCancel(context.Background())
	loadDone := make(chan int)
	go func() {
		n := 0
		defer func() { loadDone <- n }()
		for ctx.Err() == nil && n < 5000 {
			resp, err := http.Get(app.URL("/alloc?kb=256"))
			if err != nil {
				return
			}
			resp.Body.Close()
			n++
		}
	}()
	r, _ := runRecipe(t, "gc-pressure", "--set", fmt.Sprintf("pid=%d", app.PID), "--set", "duration=3s", "--set", "gc_log="+gcLog)
	cancel()
	<-loadDone
	var d recipeData
	decodeData(t, r, &d)
	if d.JVM == nil || d.JVMPauses == nil || d.GC == nil {
		t.Fatalf("sections %s", r.Data)
	}
	if d.JVMPauses.YoungGCs == 0 || len(d.JVMPauses.Intervals) != 3 || d.JVM.AllocBytesEden == 0 {
		t.Errorf("pauses %+v, Eden allocation %d", d.JVMPauses, d.JVM.AllocBytesEden)
	}
	if d.GC.YoungGCs == 0 || d.GC.Collector != "G1" {
		t.Errorf("GC log: %d young GCs, collector %q", d.GC.YoungGCs, d.GC.Collector)
	}
	onlyFamilies(t, r, "jvm", "gc")
}
