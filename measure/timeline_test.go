package measure

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/report"
)

// The timeline joins every part's intervals by tick, and the pause rule
// reads the joined rows.
func TestTimelineJoinsParts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	soft := evidence.SoftirqEvidence{Intervals: []evidence.SoftirqInterval{
		{End: at(1), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 1, BusiestShare: 0.03},
		{End: at(2), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 1, BusiestShare: 0.03},
		{End: at(3), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 0, BusiestShare: 0.03},
	}}
	net := evidence.NetEvidence{Softirq: soft, Port: 9000}
	net.Sockets.Sockets = []evidence.UDPSocket{{Port: 9000, Inode: 7, WakeupsByCPU: map[int]uint64{1: 90, 0: 10}}}
	net.Drops.Intervals = []evidence.DropInterval{{End: at(1)}, {End: at(2), Count: 1400}, {End: at(3)}}
	net.Sockets.Intervals = []evidence.SocketInterval{
		{End: at(1), Datagrams: u(10000), QueueBytes: u(0)},
		{End: at(2), Datagrams: u(8600), QueueBytes: u(131072)},
		{End: at(3), Datagrams: u(10000), QueueBytes: u(0)},
	}
	pauses := evidence.JVMPauses{PID: 4242, Intervals: []evidence.JVMPauseInterval{
		{End: at(1), Safepoints: i(0), SafepointTimeNs: i(0)},
		{End: at(2), OldGCs: 1, GCTimeNs: 300e6, Safepoints: i(1), SafepointTimeNs: i(301e6)},
		{End: at(3), Safepoints: i(0), SafepointTimeNs: i(0)},
	}}
	ps := &Parts{Softirq: &Softirq{netRX: []map[int]float64{{1: 0.04}, {1: 0.05}, {1: 0.04}}},
		Net: &NetParts{joined: map[string]Part{udpdrop.Spec.Name: &Drops{}}}, NetOptions: NetOptions{Port: 9000}, Interval: time.Second}
	r := &Sections{Net: &NetResult{Evidence: net}, JVMPauses: &pauses}
	tl := ps.timeline(r, Run{Begin: t0})
	if tl == nil || len(tl.Rows) != 3 || tl.Port != 9000 || tl.PID != 4242 || tl.DropSource != "probe" || len(tl.FeedingCPUs) != 1 || tl.FeedingCPUs[0] != 1 {
		t.Fatalf("timeline %+v", tl)
	}
	row := tl.Rows[1]
	if *row.Drops != 1400 || *row.DropsPerS != 1400 || *row.DatagramsPerS != 8600 || *row.SocketQueueBytes != 131072 ||
		*row.JVMStoppedNs != 301e6 || *row.JVMGCs != 1 || *row.FeedingNetRXShare != 0.05 || row.DurationNs != int64(time.Second) {
		t.Errorf("paused row %+v", row)
	}
	fs := diagnose.Run(diagnose.TimelineRules, *tl)
	if len(fs) != 1 || fs[0].Title != "drops on UDP port 9000 rose to 1.4k/s in the interval the JVM (pid 4242) was stopped for 301ms" {
		t.Errorf("findings %+v", fs)
	}
	var text bytes.Buffer
	rep := report.New("recipe", "test", t0)
	rep.Findings = fs
	rep.Data = report.RecipeData{Net: &report.NetData{NetEvidence: r.Net.Evidence}, JVMPauses: &pauses, Timeline: tl}
	if err := report.Render(&text, rep, report.Text); err != nil || !strings.Contains(text.String(), "Timeline (port 9000, JVM pid 4242)") ||
		!strings.Contains(text.String(), "JVM stopped") || strings.Count(text.String(), "Findings") != 1 {
		t.Errorf("text (%v):\n%s", err, text.String())
	}
	// One part with a timeline: its section's intervals say it all.
	if tl := ps.timeline(&Sections{Net: &NetResult{Evidence: evidence.NetEvidence{Softirq: soft}}}, Run{Begin: t0}); tl != nil {
		t.Errorf("a timeline of one part: %+v", tl)
	}
}
