package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func p[T any](v T) *T { return &v }

// tlRow is one second of a port at 10k datagrams/s and a JVM's counters.
func tlRow(sec int, drops uint64, gcs, gcMs, stoppedMs int64) evidence.TimelineRow {
	read := 10000 - drops
	return evidence.TimelineRow{
		End: time.Date(2026, 1, 1, 12, 0, sec, 0, time.UTC), DurationNs: int64(time.Second),
		Drops: p(drops), Datagrams: p(read), SocketQueueBytes: p(uint64(0)),
		JVMGCs: p(gcs), JVMGCTimeNs: p(gcMs * 1e6), JVMSafepoints: p(gcs), JVMStoppedNs: p(stoppedMs * 1e6),
	}
}

func TestDropsDuringPause(t *testing.T) {
	tl := func(rows ...evidence.TimelineRow) evidence.Timeline {
		return evidence.Timeline{IntervalNs: int64(time.Second), Port: 9000, PID: 4242, DropSource: "probe", Rows: rows}
	}
	cases := []struct {
		name      string
		tl        evidence.Timeline
		th        Thresholds
		want      bool
		title     string
		severity  Severity
		evidence  string
		rcvbufMin int64
	}{
		{name: "a 300 ms pause inside one interval", want: true, severity: Crit,
			tl:    tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 2900, 1, 300, 301), tlRow(3, 0, 0, 0, 1), tlRow(4, 0, 0, 0, 0)),
			title: "drops on UDP port 9000 rose to 2.9k/s in the interval the JVM (pid 4242) was stopped for 301ms",
			// 10k/s arriving for 301 ms at 2 KiB each: 6.2 MB → 8 MiB.
			evidence: "2900 drops on UDP port 9000 (2.9k/s) while the JVM (pid 4242) was stopped for 301ms (1 GC took 300ms; 1 safepoint)", rcvbufMin: 8 << 20},
		{name: "a pause across a tick: the GC counted in one interval, its time in the next", want: true, severity: Crit,
			tl:       tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 467, 1, 0, 0), tlRow(3, 923, 0, 144, 144), tlRow(4, 0, 0, 0, 0)),
			title:    "drops on UDP port 9000 rose to 923/s in the interval the JVM (pid 4242) was stopped for 144ms",
			evidence: "1390 drops on UDP port 9000 (467 + 923; 923/s at the peak)"},
		{name: "drops all along: the pause adds nothing", want: false,
			tl: tl(tlRow(1, 800, 0, 0, 0), tlRow(2, 900, 1, 120, 120), tlRow(3, 850, 0, 0, 0), tlRow(4, 800, 0, 0, 0))},
		{name: "drops all along, the pause triples them", want: true, severity: Warn,
			tl:    tl(tlRow(1, 100, 0, 0, 0), tlRow(2, 900, 1, 120, 120), tlRow(3, 110, 0, 0, 0), tlRow(4, 90, 0, 0, 0)),
			title: "drops on UDP port 9000 rose to 900/s in the interval the JVM (pid 4242) was stopped for 120ms"},
		{name: "a short pause is below min_stopped_ms", want: false,
			tl: tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 300, 1, 30, 30), tlRow(3, 0, 0, 0, 0))},
		{name: "the recipe lowers min_stopped_ms", want: true, th: Thresholds{"min_stopped_ms": 20},
			tl: tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 300, 1, 30, 30), tlRow(3, 0, 0, 0, 0))},
		{name: "a pause without drops", want: false,
			tl: tl(tlRow(1, 0, 0, 0, 0), tlRow(2, 0, 1, 400, 400), tlRow(3, 0, 0, 0, 0))},
		{name: "no JVM in the timeline", want: false,
			tl: evidence.Timeline{Rows: []evidence.TimelineRow{{End: time.Now(), DurationNs: 1e9, Drops: p(uint64(5000))}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := RunTuned(TimelineRules, c.tl, func(string) Thresholds { return c.th })
			if got := len(fs) == 1; got != c.want {
				t.Fatalf("finding %v, want %v: %+v", got, c.want, fs)
			}
			if !c.want {
				return
			}
			f := fs[0]
			if f.ID != "jvm-net.drops-during-pause" || (c.title != "" && f.Title != c.title) || (c.severity != 0 && f.Severity != c.severity) {
				t.Errorf("finding %s %s %q", f.ID, f.Severity, f.Title)
			}
			if c.evidence != "" && !strings.Contains(strings.Join(f.Evidence, "\n"), c.evidence) {
				t.Errorf("evidence does not say %q:\n%s", c.evidence, strings.Join(f.Evidence, "\n"))
			}
			if c.rcvbufMin > 0 && f.Recommendation.Parameters["so_rcvbuf_bytes"] < c.rcvbufMin {
				t.Errorf("so_rcvbuf_bytes %d, want ≥ %d", f.Recommendation.Parameters["so_rcvbuf_bytes"], c.rcvbufMin)
			}
		})
	}
}

func TestLocksContended(t *testing.T) {
	sec := evidence.LockSection{TotalNs: 60e6, StackEvery: 8, Sites: []evidence.LockSite{
		{Class: "socket-receive-queue", Site: "__udp_enqueue_schedule_skb", Count: 9000, TotalNs: 50e6, MaxNs: 40e3},
		{Class: "other", Site: "try_to_wake_up", Count: 100, TotalNs: 10e6, MaxNs: 5e3},
	}}
	in := LockInput{Locks: sec, DurationNs: int64(time.Second), CPUs: 2}
	fs := RunTuned(LockRules, in, nil)
	// 60 ms over 2 CPU-seconds is 3 %: a warning with the socket advice.
	if len(fs) != 1 || fs[0].Severity != Warn || fs[0].Recommendation.Kind != KindCode ||
		!strings.Contains(fs[0].Title, "3.0% of all CPU time; 83.3% of it at __udp_enqueue_schedule_skb") {
		t.Fatalf("findings %+v", fs)
	}
	if fs := RunTuned(LockRules, in, func(string) Thresholds { return Thresholds{"crit_share": 0.02} }); len(fs) != 1 || fs[0].Severity != Crit {
		t.Errorf("crit_share 2%%: %+v", fs)
	}
	if fs := RunTuned(LockRules, in, func(string) Thresholds { return Thresholds{"warn_share": 0.05} }); len(fs) != 0 {
		t.Errorf("warn_share 5%%: %+v", fs)
	}
	in.Locks.Unavailable = "lock contention: no tracepoint"
	if fs := Run(LockRules, in); len(fs) != 0 {
		t.Errorf("unavailable section: %+v", fs)
	}
}
