package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report"
)

type labTCPReport struct {
	Schema  string            `json:"schema"`
	Command string            `json:"command"`
	Data    report.LabTCPData `json:"data"`
}

// labTCPLeftovers is what lab tcp could leave behind: namespaces and its
// report directories.
func labTCPLeftovers(t *testing.T) []string {
	t.Helper()
	ns, err := netlab.Namespaces()
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "perfscope-lab-tcp-*"))
	return append(ns, dirs...)
}

// assertNoNewLeftovers fails on a namespace or directory that was not
// there before the lab ran (another test's may come and go meanwhile).
func assertNoNewLeftovers(t *testing.T, before []string) {
	t.Helper()
	for _, l := range labTCPLeftovers(t) {
		if !slices.Contains(before, l) {
			t.Errorf("lab tcp left %s", l)
		}
	}
}

func runLabTCP(t *testing.T, scenarios ...string) labTCPReport {
	t.Helper()
	args := []string{"lab", "tcp", "-o", "json", "--scenario", strings.Join(scenarios, ",")}
	cmd := exec.Command(Perfscope(t), args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("perfscope %v: %v\n%s", args, err, stderr.String())
	}
	var rep labTCPReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	if rep.Schema != report.Schema || rep.Command != "lab tcp" {
		t.Fatalf("envelope %q %q", rep.Schema, rep.Command)
	}
	t.Logf("lab tcp %v:\n%s", scenarios, stderr.String())
	return rep
}

func labTCPRow(s report.LabTCPScenario, key string) report.LabTCPRow {
	for _, r := range s.Rows {
		if r.Key == key {
			return r
		}
	}
	return report.LabTCPRow{Key: key}
}

// TestLabTCP runs the backlog-overflow, gro-off and rmem-bdp scenarios
// end to end: perfscope tcp reports the planted fault, --apply makes the
// finding's change inside the lab's namespace, and after it the accept
// queue no longer overflows (and no client waits a second for a retried
// SYN), GRO takes segments off the stack, and connections through the
// delay line grow their windows past tcp_rmem's old max and carry more;
// nothing is left behind (the delay line's TUN device goes with it). A scenario
// measures a shared machine, so one that fails runs once more on its own.
func TestLabTCP(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	leftBefore := labTCPLeftovers(t)

	results := map[string]report.LabTCPScenario{}
	rep := runLabTCP(t, "backlog-overflow", "gro-off", "rmem-bdp", "rfs-off")
	if len(rep.Data.Scenarios) != 3 || len(rep.Data.Skipped) != 1 || rep.Data.Skipped[0].Name != "rfs-off" || rep.Data.Skipped[0].Reason == "" {
		t.Fatalf("scenarios %d, skipped %+v", len(rep.Data.Scenarios), rep.Data.Skipped)
	}
	for _, s := range rep.Data.Scenarios {
		results[s.Name] = s
		if !s.OK() {
			t.Logf("%s: %s; running it again", s.Name, s.Problem)
			results[s.Name] = runLabTCP(t, s.Name).Data.Scenarios[0]
		}
	}

	t.Run("backlog-overflow", func(t *testing.T) {
		s := results["backlog-overflow"]
		if !s.OK() || s.Found == nil || !s.Gone {
			t.Fatalf("not proved: %+v", s)
		}
		if !slices.Contains(s.Applied, "sysctl -w net.core.somaxconn=4096") {
			t.Errorf("applied %v, want the finding's somaxconn change", s.Applied)
		}
		over := labTCPRow(s, "listen_overflows_per_s")
		if over.Before == nil || over.After == nil || *over.Before <= 0 {
			t.Fatalf("ListenOverflows before %v: the storm did not overflow the queue", over.Before)
		}
		// None after; a handful would still be "far fewer".
		if *over.After > *over.Before/20 {
			t.Errorf("ListenOverflows/s after the fix %.1f, before %.1f", *over.After, *over.Before)
		}
		if b := labTCPRow(s, "accept_backlog"); b.Before == nil || *b.Before != 16 || b.After == nil || *b.After != 4096 {
			t.Errorf("listener backlog %v → %v, want 16 → 4096", b.Before, b.After)
		}
		if slow := labTCPRow(s, "slow_connects_per_s"); slow.After == nil || *slow.After > 0 && *slow.After >= *slow.Before {
			t.Errorf("connects of a second or more %v → %v", slow.Before, slow.After)
		}
	})
	t.Run("gro-off", func(t *testing.T) {
		s := results["gro-off"]
		if !s.OK() || s.Found == nil || !s.Gone || !slices.Contains(s.Applied, "ethtool -K vb rx-gro on") {
			t.Fatalf("not proved: %+v", s)
		}
		// GRO merges wire-sized segments: the TCP layer takes fewer.
		segs, bytesPerS := labTCPRow(s, "in_segs_per_s"), labTCPRow(s, "bytes_per_s")
		if segs.Before == nil || segs.After == nil || bytesPerS.Before == nil || bytesPerS.After == nil || *bytesPerS.Before <= 0 || *bytesPerS.After <= 0 {
			t.Fatalf("rows %+v", s.Rows)
		}
		perByteBefore, perByteAfter := *segs.Before / *bytesPerS.Before, *segs.After / *bytesPerS.After
		if perByteAfter > perByteBefore/2 {
			t.Errorf("segments per byte %.2e → %.2e: GRO merged nothing", perByteBefore, perByteAfter)
		}
	})
	t.Run("rmem-bdp", func(t *testing.T) {
		s := results["rmem-bdp"]
		if !s.OK() || s.Found == nil || !s.Gone || !slices.Contains(s.Applied, "sysctl -w 'net.ipv4.tcp_rmem=4096 16384 16777216'") {
			t.Fatalf("not proved: %+v", s)
		}
		// The RTT is the delay line's 30 ms, before and after.
		rtt := labTCPRow(s, "rcv_rtt_ms")
		if rtt.Before == nil || *rtt.Before < 30 || *rtt.Before > 90 {
			t.Errorf("rcv_rtt before %v ms, want the delay line's 30 ms and some", rtt.Before)
		}
		// Buffers capped at 64 KiB before; grown well past it after, and
		// the connections carry several times more.
		buf, wnd, bps := labTCPRow(s, "rcvbuf_bytes"), labTCPRow(s, "rcv_wnd_bytes"), labTCPRow(s, "bytes_per_s")
		if buf.Before == nil || *buf.Before > 65536 || buf.After == nil || *buf.After < 4*65536 {
			t.Errorf("rcvbuf %v → %v, want 64 KiB → several times more", buf.Before, buf.After)
		}
		if wnd.Before == nil || wnd.After == nil || *wnd.After < 4**wnd.Before {
			t.Errorf("rcv_wnd %v → %v: the window did not grow", wnd.Before, wnd.After)
		}
		if bps.Before == nil || bps.After == nil || *bps.Before <= 0 || *bps.After < 4**bps.Before {
			t.Errorf("bytes/s %v → %v: want several times more once the window is not the limit", bps.Before, bps.After)
		}
	})
	testutil.AssertNoNewBPF(t, progs, maps)
	assertNoNewLeftovers(t, leftBefore)
}

// TestLabTCPInterrupted: Ctrl-C while perfscope tcp measures stops the
// measurement, the server and clients, deletes the namespaces, and exits
// 130 naming the scenario.
func TestLabTCPInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	leftBefore := labTCPLeftovers(t)

	cmd := exec.Command(Perfscope(t), "lab", "tcp", "--scenario", "backlog-overflow", "--duration", "20s")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "measuring") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	// Let perfscope tcp attach its probes in the namespace.
	time.Sleep(3 * time.Second)
	if code := interruptLab(t, cmd, done, stderr); code != 130 {
		t.Errorf("interrupted lab exited %d, want 130:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "lab tcp interrupted during backlog-overflow, whose namespaces were removed; 0 of 1 scenarios finished") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	testutil.AssertNoNewBPF(t, progs, maps)
	assertNoNewLeftovers(t, leftBefore)
}
