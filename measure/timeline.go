package measure

import (
	"sort"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/udpdrop"
)

// timeline joins the parts' intervals by tick: the window ticks every
// part at the same instant, so one tick's readings share their end time.
// It is nil without an interval, or when only one part keeps a timeline
// (its section's intervals say it all).
func (ps *Parts) timeline(r *Sections, run Run) *evidence.Timeline {
	if ps.Interval == 0 {
		return nil
	}
	b := &timelineRows{tl: &evidence.Timeline{IntervalNs: int64(ps.Interval)}, rows: map[time.Time]*evidence.TimelineRow{}}
	soft, locks := r.Softirq, r.Locks
	if r.Net != nil {
		soft, locks = nil, nil
		if ps.Softirq != nil {
			soft = &r.Net.Evidence.Softirq
		}
		if ps.Locks != nil {
			locks = &r.Net.Evidence.Locks
		}
		b.tl.Port = ps.NetOptions.Port
		for _, s := range r.Net.Evidence.Sockets.Sockets {
			b.tl.FeedingCPUs = unionInts(b.tl.FeedingCPUs, s.FeedingCPUs(diagnose.ReuseportCrossFeed))
		}
	}
	if soft != nil && len(soft.Intervals) > 0 {
		b.softirq(soft.Intervals, ps.Softirq.IntervalNetRX())
	}
	if locks != nil && len(locks.Intervals) > 0 {
		b.locks(locks.Intervals)
	}
	if r.Net != nil {
		drops, _ := ps.Net.Part(udpdrop.Spec.Name).(*Drops)
		b.net(&r.Net.Evidence, drops != nil && drops.opened())
		if t := r.Net.Evidence.TCP; t != nil && len(t.Intervals) > 0 {
			b.tcp(t)
		}
	}
	if p := r.JVMPauses; p != nil && len(p.Intervals) > 0 {
		b.jvm(p)
	}
	if b.kinds < 2 {
		return nil
	}
	return b.finish(run.Begin)
}

// timelineRows builds a timeline: a row per tick, filled by every part
// that kept intervals (kinds counts them).
type timelineRows struct {
	tl    *evidence.Timeline
	rows  map[time.Time]*evidence.TimelineRow
	kinds int
}

// row is the row of the tick that ended at end.
func (b *timelineRows) row(end time.Time) *evidence.TimelineRow {
	if x, ok := b.rows[end]; ok {
		return x
	}
	x := &evidence.TimelineRow{End: end}
	b.rows[end] = x
	return x
}

// softirq fills NET_RX per second and share, the busiest CPU, and the
// feeding CPUs' NET_RX share (netRX: per interval, per CPU).
func (b *timelineRows) softirq(intervals []evidence.SoftirqInterval, netRX []map[int]float64) {
	b.kinds++
	for i, iv := range intervals {
		x := b.row(iv.End)
		x.NetRXPerS, x.NetRXShare = ptr(iv.NetRXPerS), ptr(iv.NetRXShare)
		if iv.BusiestCPU >= 0 {
			x.BusiestCPU, x.BusiestShare = ptr(iv.BusiestCPU), ptr(iv.BusiestShare)
		}
		if len(b.tl.FeedingCPUs) > 0 && i < len(netRX) {
			var sum float64
			for _, c := range b.tl.FeedingCPUs {
				sum += netRX[i][c]
			}
			x.FeedingNetRXShare = ptr(sum / float64(len(b.tl.FeedingCPUs)))
		}
	}
}

// locks fills the contentions and wait times, the sockets' apart.
func (b *timelineRows) locks(intervals []evidence.LockInterval) {
	b.kinds++
	for _, iv := range intervals {
		x := b.row(iv.End)
		sock := iv.ByClass["socket-receive-queue"] + iv.ByClass["socket-wakeup"] + iv.ByClass["socket-lock"]
		x.Contentions, x.LockWaitNs, x.SocketLockWaitNs = ptr(iv.Count), ptr(iv.TotalNs), ptr(sock)
	}
}

// net fills the queues' packets, the sockets' datagrams and queues, and
// the drops: a sampled drop probe's intervals are estimates, so the
// sockets' own drop counters (sk_drops), exact, win then. probeOpened
// says the drop probe ran.
func (b *timelineRows) net(ev *evidence.NetEvidence, probeOpened bool) {
	if len(ev.Queues.Intervals) > 0 {
		b.kinds++
		for _, iv := range ev.Queues.Intervals {
			x := b.row(iv.End)
			x.RXPackets, x.TXPackets = ptr(iv.RXPackets), ptr(iv.TXPackets)
		}
	}
	probeDrops := probeOpened && len(ev.Drops.Intervals) > 0 &&
		(ev.Drops.Estimate == nil || len(ev.Sockets.Intervals) == 0)
	if probeDrops {
		b.tl.DropSource = "probe"
		for _, iv := range ev.Drops.Intervals {
			b.row(iv.End).Drops = ptr(iv.Count)
		}
	}
	if len(ev.Sockets.Intervals) > 0 {
		b.kinds++
		for _, iv := range ev.Sockets.Intervals {
			x := b.row(iv.End)
			x.Datagrams, x.SocketQueueBytes = iv.Datagrams, iv.QueueBytes
			if !probeDrops && iv.Drops != nil {
				b.tl.DropSource = "socket"
				x.Drops = iv.Drops
			}
		}
	} else if probeDrops {
		b.kinds++
	}
}

// tcp fills the listeners' overflows, drops and accept queues.
func (b *timelineRows) tcp(t *evidence.TCPEvidence) {
	b.kinds++
	b.tl.TCPPort = t.Port
	for _, iv := range t.Intervals {
		x := b.row(iv.End)
		x.ListenOverflows, x.ListenDrops, x.TCPBacklogDrops, x.PassiveOpens = iv.ListenOverflows, iv.ListenDrops, iv.BacklogDrops, iv.PassiveOpens
		if iv.Backlog > 0 {
			x.AcceptQueuePeak, x.AcceptBacklog = ptr(iv.QueuePeak), ptr(iv.Backlog)
		}
	}
}

// jvm fills the JVM's GCs and safepoints.
func (b *timelineRows) jvm(p *evidence.JVMPauses) {
	b.kinds++
	b.tl.PID = p.PID
	for _, iv := range p.Intervals {
		x := b.row(iv.End)
		x.JVMGCs, x.JVMGCTimeNs = ptr(iv.YoungGCs+iv.OldGCs), ptr(iv.GCTimeNs)
		x.JVMSafepoints, x.JVMStoppedNs = iv.Safepoints, iv.SafepointTimeNs
	}
}

// finish orders the rows by time, from the window's begin, with each
// row's length and rates.
func (b *timelineRows) finish(begin time.Time) *evidence.Timeline {
	prev := begin
	ends := make([]time.Time, 0, len(b.rows))
	for end := range b.rows {
		ends = append(ends, end)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	for _, end := range ends {
		x := b.rows[end]
		x.DurationNs = int64(end.Sub(prev))
		prev = end
		if secs := float64(x.DurationNs) / 1e9; secs > 0 {
			if x.Drops != nil {
				x.DropsPerS = ptr(float64(*x.Drops) / secs)
			}
			if x.Datagrams != nil {
				x.DatagramsPerS = ptr(float64(*x.Datagrams) / secs)
			}
		}
		b.tl.Rows = append(b.tl.Rows, *x)
	}
	return b.tl
}

func ptr[T any](v T) *T { return &v }

func unionInts(a, b []int) []int {
	seen := map[int]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			seen[x] = true
			a = append(a, x)
		}
	}
	sort.Ints(a)
	return a
}
