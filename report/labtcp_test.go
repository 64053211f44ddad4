package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
)

func labF(v float64) *float64 { return &v }

func labTCPSample() LabTCPData {
	return LabTCPData{
		Scenarios: []LabTCPScenario{{
			Name: "backlog-overflow", Fault: "net.core.somaxconn 16", Finding: "tcp.accept-overflow",
			Found:   &diagnose.Finding{ID: "tcp.accept-overflow", Severity: diagnose.Crit, Title: "276 handshakes refused because a listener's accept queue was full"},
			Applied: []string{"sysctl -w net.core.somaxconn=4096", "server restarted: its listeners created again"},
			Gone:    true,
			Rows: []LabTCPRow{
				{Key: "listen_overflows_per_s", Label: "TcpExt ListenOverflows/s", Unit: "per_s", Source: "perfscope", Before: labF(91.4), After: labF(0)},
				{Key: "in_segs_per_s", Label: "Tcp InSegs/s", Unit: "per_s", Source: "perfscope", Before: labF(247227.4), After: labF(12208.2)},
				{Key: "bytes_per_s", Label: "bytes received/s", Unit: "bytes/s", Source: "lab", Before: labF(3.2e8), After: nil},
				{Key: "rcv_wnd_bytes", Label: "receive window", Unit: "bytes", Source: "perfscope", Before: labF(39600), After: labF(10.3e6)},
				{Key: "rcv_rtt_ms", Label: "receiver's RTT", Unit: "ms", Source: "perfscope", Before: labF(31.14), After: labF(35.5)},
			},
		}, {
			Name: "gro-off", Fault: "GRO off", Finding: "tcp.gro-off", Applied: []string{},
			Problem: "perfscope did not report tcp.gro-off for the planted fault",
		}},
		Skipped: []LabTCPSkipped{{Name: "rfs-off", Fault: "RFS off", Reason: "rps_sock_flow_entries is host-wide"}},
	}
}

func TestLabTCPText(t *testing.T) {
	d := labTCPSample()
	var b bytes.Buffer
	for _, s := range d.Scenarios {
		WriteLabTCPScenario(&b, s)
	}
	r := New("lab tcp", "test", time.Now())
	r.Meta.DurationNs = int64(75 * time.Second)
	if err := d.WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"backlog-overflow: net.core.somaxconn 16",
		"found:   tcp.accept-overflow (crit): 276 handshakes refused",
		"applied: sysctl -w net.core.somaxconn=4096",
		"after:   tcp.accept-overflow gone",
		"TcpExt ListenOverflows/s", "91.4", "-100%",
		"247227", "12208", "-95%", // large rates without decimals
		"320.0 MB/s",                    // an after that was not measured prints "-"
		"39.6 KB", "10.3 MB", "31.1 ms", // window sizes and RTTs
		"found:   NOT tcp.gro-off",
		"problem: perfscope did not report tcp.gro-off",
		"1 of 2 scenarios proved their fix in 1m15s.",
		"skipped rfs-off (RFS off): rps_sock_flow_entries is host-wide",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if d.Failed() != 1 || d.Finished() != 2 {
		t.Errorf("Failed() = %d, Finished() = %d", d.Failed(), d.Finished())
	}
	var kept bytes.Buffer
	d.WriteKept(&kept, "/tmp/lab")
	if !strings.HasPrefix(kept.String(), "Kept: reports in /tmp/lab; namespaces:") || !strings.Contains(kept.String(), "perfscope tcp --iface vb") {
		t.Errorf("WriteKept: %q", kept.String())
	}
}

func TestLabTCPJSONAndFormats(t *testing.T) {
	if got := Formats("lab tcp"); !slices.Equal(got, []Format{Text, JSON}) {
		t.Errorf("formats %v", got)
	}
	b, err := json.Marshal(labTCPSample())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"scenarios":`, `"skipped":`, `"finding":"tcp.accept-overflow"`, `"found":{`, `"applied":`, `"gone":true`,
		`"rows":`, `"key":"listen_overflows_per_s"`, `"source":"perfscope"`, `"before":91.4`, `"after":null`, `"reason":"rps_sock_flow_entries is host-wide"`, `"problem":`, `"duration_ns":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
}
