package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udplab"
)

// BenchmarkLabUDP runs `perfscope lab udp` (every scenario) and reports its
// wall time — target < 3 minutes on 2 CPUs — and, per scenario, whether it
// proved its fix and the before/after figures of its table, for
// BENCHMARKS.md.
//
//	go test -run XXX -bench LabUDP -benchtime 1x -timeout 20m ./bench/
func BenchmarkLabUDP(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	bin := buildBinary(b)
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "lab", "udp", "-o", "json")
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		started := time.Now()
		err := cmd.Run()
		took := time.Since(started)
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
			b.Fatalf("lab udp: %v\n%s", err, stderr.String())
		}
		var rep struct {
			Data []udplab.Result `json:"data"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(took.Seconds(), "s/lab")
		proved := 0
		for _, r := range rep.Data {
			if r.OK() {
				proved++
			}
			b.Logf("%s", labRow(r))
		}
		b.ReportMetric(float64(proved), "scenarios-proved")
		b.Logf("lab udp: %d of %d scenarios proved their fix in %v", proved, len(rep.Data), took.Round(time.Second))
	}
}

// labRow is one scenario as a Markdown table row: name, finding (severity),
// after the fix, and its metrics before → after.
func labRow(r udplab.Result) string {
	found, after := "—", "—"
	if r.Found != nil {
		found = fmt.Sprintf("%s (%s)", r.Found.ID, r.Found.Severity)
	} else if r.Scenario.Finding != "" {
		found = "not found"
	}
	if r.Comparison != nil {
		after = "still there"
		if r.Gone {
			after = "gone"
		}
	}
	if r.Scenario.Fix == udplab.FixNone {
		found = fmt.Sprintf("warn or worse after: %v", r.WarnOrWorse)
	}
	metrics := ""
	if r.Comparison != nil {
		want := map[string]bool{"packets_per_s": true, "drops_per_s": true, "net_rx.ns_per_packet": true}
		for _, k := range r.Scenario.Metrics {
			want[k] = true
		}
		for _, m := range r.Comparison.Metrics {
			if !want[m.Key] || m.Before == nil || m.After == nil {
				continue
			}
			metrics += fmt.Sprintf("%s %.4g → %.4g; ", m.Label, *m.Before, *m.After)
		}
	}
	return fmt.Sprintf("| %s | %s | %s | %s| %.0f s |", r.Scenario.Name, found, after, metrics, time.Duration(r.DurationNs).Seconds())
}
