package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// tcpRow is one second of a listener taking 200 connections/s and a
// JVM's counters: overflows and backlog drops in the interval, the
// fullest accept queue of backlog 50.
func tcpRow(sec int, overflows, backlogDrops uint64, gcs, stoppedMs int64) evidence.TimelineRow {
	opens := 200 - overflows
	return evidence.TimelineRow{
		End: time.Date(2026, 1, 1, 12, 0, sec, 0, time.UTC), DurationNs: int64(time.Second),
		ListenOverflows: p(overflows), ListenDrops: p(overflows), TCPBacklogDrops: p(backlogDrops), PassiveOpens: p(opens),
		AcceptQueuePeak: p(uint32(min(51, 10+overflows))), AcceptBacklog: p(uint32(50)),
		JVMGCs: p(gcs), JVMGCTimeNs: p(stoppedMs * 1e6), JVMSafepoints: p(gcs), JVMStoppedNs: p(stoppedMs * 1e6),
	}
}

func TestOverflowsDuringPause(t *testing.T) {
	tl := func(rows ...evidence.TimelineRow) evidence.Timeline {
		return evidence.Timeline{IntervalNs: int64(time.Second), TCPPort: 8080, PID: 4242, Rows: rows}
	}
	cases := []struct {
		name     string
		tl       evidence.Timeline
		th       Thresholds
		want     bool
		title    string
		severity Severity
		evidence string
		backlog  int64
	}{
		{name: "a 400 ms pause refuses connections", want: true, severity: Crit,
			tl:       tl(tcpRow(1, 0, 0, 0, 0), tcpRow(2, 30, 2, 1, 400), tcpRow(3, 0, 0, 0, 1), tcpRow(4, 0, 0, 0, 0)),
			title:    "accept-queue overflows on TCP port 8080 rose to 32/s in the interval the JVM (pid 4242) was stopped for 400ms",
			evidence: "30 connections refused (ListenOverflows) and 2 segments dropped from socket backlogs (TCPBacklogDrop) while the JVM (pid 4242) was stopped for 400ms (1 GC took 400ms; 1 safepoint)",
			// 200 connections/s for 400 ms: 81 → 128.
			backlog: 128},
		{name: "overflows all along: the pause adds nothing", want: false,
			tl: tl(tcpRow(1, 40, 0, 0, 0), tcpRow(2, 45, 0, 1, 120), tcpRow(3, 40, 0, 0, 0), tcpRow(4, 42, 0, 0, 0))},
		{name: "a short pause is below min_stopped_ms", want: false,
			tl: tl(tcpRow(1, 0, 0, 0, 0), tcpRow(2, 20, 0, 1, 30), tcpRow(3, 0, 0, 0, 0))},
		{name: "the recipe lowers min_stopped_ms", want: true, th: Thresholds{"min_stopped_ms": 20},
			tl: tl(tcpRow(1, 0, 0, 0, 0), tcpRow(2, 20, 0, 1, 30), tcpRow(3, 0, 0, 0, 0))},
		{name: "min_overflows_per_s above the pause's", want: false, th: Thresholds{"min_overflows_per_s": 50},
			tl: tl(tcpRow(1, 0, 0, 0, 0), tcpRow(2, 20, 0, 1, 300), tcpRow(3, 0, 0, 0, 0))},
		{name: "a pause without overflows", want: false,
			tl: tl(tcpRow(1, 0, 0, 0, 0), tcpRow(2, 0, 0, 1, 400), tcpRow(3, 0, 0, 0, 0))},
		{name: "no TCP columns: a UDP timeline", want: false,
			tl: tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 2900, 1, 300, 301), tlRow(3, 0, 0, 0, 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fs []Finding
			for _, f := range RunTuned(TimelineRules, c.tl, func(string) Thresholds { return c.th }) {
				if f.ID == "jvm-net.overflows-during-pause" {
					fs = append(fs, f)
				}
			}
			if got := len(fs) == 1; got != c.want {
				t.Fatalf("finding %v, want %v: %+v", got, c.want, fs)
			}
			if !c.want {
				return
			}
			f := fs[0]
			if (c.title != "" && f.Title != c.title) || (c.severity != 0 && f.Severity != c.severity) {
				t.Errorf("finding %s %q", f.Severity, f.Title)
			}
			if c.evidence != "" && !strings.Contains(strings.Join(f.Evidence, "\n"), c.evidence) {
				t.Errorf("evidence does not say %q:\n%s", c.evidence, strings.Join(f.Evidence, "\n"))
			}
			if c.backlog > 0 && f.Recommendation.Parameters["listen_backlog"] != c.backlog {
				t.Errorf("listen_backlog %d, want %d", f.Recommendation.Parameters["listen_backlog"], c.backlog)
			}
		})
	}
}
