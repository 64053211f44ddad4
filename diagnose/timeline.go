package diagnose

import (
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// TimelineThresholds are jvm-net.drops-during-pause's thresholds, which a
// recipe may override. A pause shorter than 50 ms is within what a receive
// buffer sized for normal jitter absorbs; a rise to three times the drops
// of the JVM's running intervals is what puts the drops on the pause
// rather than on a load that drops anyway.
var TimelineThresholds = struct{ MinStopped, MinDrops, DropRise Threshold }{
	MinStopped: Threshold{Name: "min_stopped_ms", Default: 50, Min: 1, Max: 60_000,
		Doc: "the JVM must have been stopped at least this long (ms) in the interval"},
	MinDrops: Threshold{Name: "min_drops_per_s", Default: 10, Min: 0, Max: 1e9,
		Doc: "the interval's drops per second must reach this"},
	DropRise: Threshold{Name: "rise", Default: 3, Min: 1, Max: 1e6,
		Doc: "and this many times the median drops per second of the intervals the JVM ran"},
}

// TimelineRules judge a run's joined timeline: moments when two parts'
// numbers move together.
var TimelineRules = []Rule[evidence.Timeline]{
	{ID: "jvm-net.drops-during-pause", Tunables: []Threshold{TimelineThresholds.MinStopped, TimelineThresholds.MinDrops, TimelineThresholds.DropRise}, CheckTuned: checkDropsDuringPause},
	{ID: "jvm-net.overflows-during-pause", Tunables: []Threshold{TimelineThresholds.MinStopped, TCPPauseThresholds.MinOverflows, TimelineThresholds.DropRise}, CheckTuned: checkOverflowsDuringPause},
}

// checkDropsDuringPause finds the pause during which the port's drops
// rose while the JVM serving it was stopped: a receive buffer that
// overflowed during a GC or safepoint pause. The finding quotes both
// numbers.
//
// hsperfdata counts a collection when it begins and adds its time when it
// ends, so a pause that spans a tick shows its GC in one interval and its
// time in the next; its drops fall in both. Such a pair is one episode.
func checkDropsDuringPause(tl evidence.Timeline, t Thresholds) *Finding {
	minStopped := int64(t.Get(TimelineThresholds.MinStopped) * float64(time.Millisecond))
	rows, allDrops := pauseRows(tl)
	episodes, running, baseline, arrival := pausesAndBaseline(rows, minStopped)
	if len(episodes) == 0 {
		return nil
	}
	worst, pauseDrops := worstPause(rows, episodes, baseline, t)
	if worst == nil {
		return nil
	}
	peak := rows[worst.peak]
	port := "the port"
	if tl.Port > 0 {
		port = fmt.Sprintf("UDP port %d", tl.Port)
	}
	jvm := "the JVM"
	if tl.PID > 0 {
		jvm = fmt.Sprintf("the JVM (pid %d)", tl.PID)
	}
	stopped := time.Duration(worst.stopped).Round(time.Millisecond)
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("drops on %s rose to %s/s in the interval %s was stopped for %v",
			port, count(peak.dropsPS), jvm, stopped),
	}
	pause := rows[worst.first : worst.last+1]
	if worst.first == worst.last {
		f.Evidence = append(f.Evidence, fmt.Sprintf("interval ending %s (%.2f s): %d drops on %s (%s/s) while %s was stopped for %v%s",
			peak.End.Format("15:04:05.000"), float64(peak.DurationNs)/1e9, *peak.Drops, port, count(peak.dropsPS), jvm, stopped, pauseDetail(timelineRows(pause))))
	} else {
		a, b := rows[worst.first], rows[worst.last]
		f.Evidence = append(f.Evidence, fmt.Sprintf("intervals ending %s and %s (the collection began in one and ended in the next): %d drops on %s (%d + %d; %s/s at the peak) while %s was stopped for %v%s",
			a.End.Format("15:04:05.000"), b.End.Format("15:04:05.000"), worst.drops, port, *a.Drops, *b.Drops, count(peak.dropsPS), jvm, stopped, pauseDetail(timelineRows(pause))))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("intervals in which the JVM ran (stopped < %v): median %s drops/s over %d intervals",
		time.Duration(minStopped), count(baseline), len(running)))
	if allDrops > 0 {
		share := float64(pauseDrops) / float64(allDrops)
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s of the window's %d drops fell while the JVM was stopped", pct(share), allDrops))
		if share >= 0.9 {
			f.Severity = Crit
		}
	}
	for _, r := range pause {
		if q := r.SocketQueueBytes; q != nil && *q > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("receive queue at %s: %s", r.End.Format("15:04:05.000"), byteSize(float64(*q))))
		}
	}
	if peak.FeedingNetRXShare != nil && len(tl.FeedingCPUs) > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("NET_RX on the CPUs feeding %s (%v): %s of their time in that interval",
			port, tl.FeedingCPUs, pct(*peak.FeedingNetRXShare)))
	}
	if peak.arrivePS > 0 {
		f.Impact = min(peak.dropsPS/peak.arrivePS, 1)
	}
	// The buffer that rides out the pause: what arrives while nobody
	// reads; the running intervals' median arrival rate, else the peak's.
	rate := arrival
	if rate == 0 {
		rate = peak.arrivePS
	}
	f.Recommendation = rideOutPause(rate, worst.stopped, baseline, tl.Port)
	return f
}

// pauseRow is a timeline interval with what the pause rule compares: the
// time the JVM was stopped, and drops and arrivals (drops plus datagrams
// read) per second.
type pauseRow struct {
	evidence.TimelineRow
	stopped  int64
	dropsPS  float64
	arrivePS float64
}

// pauseRows are the timeline's intervals that have both the JVM's stopped
// time and the port's drops, and the drops of them all.
func pauseRows(tl evidence.Timeline) (rows []pauseRow, allDrops uint64) {
	for _, r := range tl.Rows {
		st := r.StoppedNs()
		if st == nil || r.Drops == nil || r.DurationNs <= 0 {
			continue
		}
		secs := float64(r.DurationNs) / 1e9
		x := pauseRow{TimelineRow: r, stopped: *st, dropsPS: float64(*r.Drops) / secs}
		x.arrivePS = x.dropsPS
		if r.Datagrams != nil {
			x.arrivePS += float64(*r.Datagrams) / secs
		}
		allDrops += *r.Drops
		rows = append(rows, x)
	}
	return rows, allDrops
}

// pauseEpisode is a pause: rows first to last.
type pauseEpisode struct{ first, last int }

// pauseEpisodes finds the pauses: an interval stopped at least minStopped,
// with the one before when a collection began there and ended in it.
// inPause marks the rows they hold.
// pausesAndBaseline finds the pause episodes among rows and, over the
// intervals outside them (running), the median rate of drops (the baseline a pause
// is judged against) and of arrivals.
func pausesAndBaseline(rows []pauseRow, minStopped int64) (episodes []pauseEpisode, running []pauseRow, baseline, arrival float64) {
	episodes, inPause := pauseEpisodes(rows, minStopped)
	for i, r := range rows {
		if !inPause[i] {
			running = append(running, r)
		}
	}
	baseline = median(running, func(r pauseRow) float64 { return r.dropsPS })
	arrival = median(running, func(r pauseRow) float64 { return r.arrivePS })
	return episodes, running, baseline, arrival
}

func pauseEpisodes(rows []pauseRow, minStopped int64) (episodes []pauseEpisode, inPause []bool) {
	inPause = make([]bool, len(rows))
	for i, r := range rows {
		if r.stopped < minStopped {
			continue
		}
		e := pauseEpisode{first: i, last: i}
		if i > 0 && !inPause[i-1] && began(rows[i-1].TimelineRow) && (r.JVMGCs == nil || *r.JVMGCs == 0) {
			e.first = i - 1
		}
		for j := e.first; j <= e.last; j++ {
			inPause[j] = true
		}
		episodes = append(episodes, e)
	}
	return episodes, inPause
}

// pauseSummary is an episode's drops and stopped time, and its interval
// with the most drops per second.
type pauseSummary struct {
	pauseEpisode
	peak    int // index of the interval with the most drops per second
	drops   uint64
	stopped int64
}

// worstPause is the episode with the most drops per second in one of its
// intervals, among those whose peak reaches the thresholds (min_drops_per_s,
// rise times the running intervals' median baseline), and the drops of
// all those episodes; nil when none does.
func worstPause(rows []pauseRow, episodes []pauseEpisode, baseline float64, t Thresholds) (*pauseSummary, uint64) {
	rise := t.Get(TimelineThresholds.DropRise)
	var worst *pauseSummary
	var pauseDrops uint64
	for _, e := range episodes {
		s := pauseSummary{pauseEpisode: e, peak: e.first}
		for j := e.first; j <= e.last; j++ {
			s.drops += *rows[j].Drops
			s.stopped += rows[j].stopped
			if rows[j].dropsPS > rows[s.peak].dropsPS {
				s.peak = j
			}
		}
		p := rows[s.peak].dropsPS
		if p == 0 || p < t.Get(TimelineThresholds.MinDrops) || p < rise*baseline {
			continue
		}
		pauseDrops += s.drops
		if worst == nil || p > rows[worst.peak].dropsPS {
			s := s
			worst = &s
		}
	}
	return worst, pauseDrops
}

// timelineRows strips the pause rule's rates off rows.
func timelineRows(rs []pauseRow) []evidence.TimelineRow {
	out := make([]evidence.TimelineRow, len(rs))
	for i, r := range rs {
		out[i] = r.TimelineRow
	}
	return out
}

// rideOutPause recommends a receive buffer that holds what arrives at rate
// while the JVM is stopped for stoppedNs, at the charge of one small
// datagram each.
func rideOutPause(rate float64, stoppedNs int64, baseline float64, port int) Recommendation {
	stopped := time.Duration(stoppedNs).Round(time.Millisecond)
	need := rate * float64(stoppedNs) / 1e9 * RcvbufTruesize
	rec := Recommendation{
		Kind: KindCode,
		Why: "While the JVM is stopped at a safepoint (a GC pause or another VM operation) its receiving thread does not read; " +
			"datagrams arriving meanwhile wait in the socket's receive buffer and are dropped once it is full. " +
			"Either the buffer holds a pause's worth of traffic or the pauses get shorter.",
		Expected: fmt.Sprintf("No drops in the pause intervals once the buffer holds %v of arrivals at %s/s; the drop rate of the running intervals (%s/s) stays.",
			stopped, count(rate), count(baseline)),
		Caveats: []string{
			"The kernel caps SO_RCVBUF at net.core.rmem_max (SO_RCVBUFFORCE needs CAP_NET_ADMIN); raise it first.",
			"Shorter pauses fix the cause: the gc-pressure recipe measures allocation per request and the GC log (a smaller young generation or a pause-time goal).",
		},
	}
	if need > 0 {
		size := roundUpPow2(min(need, RcvbufMaxBytes))
		rec.Parameters = map[string]int64{"so_rcvbuf_bytes": size}
		rec.Code = []CodeSketch{{Lang: "java", Code: fmt.Sprintf(
			"DatagramChannel ch = DatagramChannel.open();\nch.setOption(StandardSocketOptions.SO_RCVBUF, %d); // %v at %s/s, ~%d B per datagram\nch.bind(new InetSocketAddress(%d));",
			size, stopped, count(rate), RcvbufTruesize, port)}}
	}
	return rec
}

// began says a collection began in the interval without its time being
// counted yet: the pause was still on at the tick.
func began(r evidence.TimelineRow) bool {
	return r.JVMGCs != nil && *r.JVMGCs > 0 && r.JVMGCTimeNs != nil && *r.JVMGCTimeNs == 0
}

// pauseDetail names the collections and safepoints of an episode.
func pauseDetail(rows []evidence.TimelineRow) string {
	var gcs, gcNs, safepoints int64
	for _, r := range rows {
		if r.JVMGCs != nil {
			gcs += *r.JVMGCs
		}
		if r.JVMGCTimeNs != nil {
			gcNs += *r.JVMGCTimeNs
		}
		if r.JVMSafepoints != nil {
			safepoints += *r.JVMSafepoints
		}
	}
	var parts []string
	if gcs > 0 {
		parts = append(parts, fmt.Sprintf("%d %s took %v", gcs, plural(gcs, "GC", "GCs"), time.Duration(gcNs).Round(time.Millisecond)))
	}
	if safepoints > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", safepoints, plural(safepoints, "safepoint", "safepoints")))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// count prints a rate like the report does: 1412 → "1.4k".
func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func byteSize(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func roundUpPow2(v float64) int64 {
	if v <= 1 {
		return 1
	}
	n := uint64(math.Ceil(v))
	return int64(1) << (64 - bits.LeadingZeros64(n-1))
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
