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
	tl := &evidence.Timeline{IntervalNs: int64(ps.Interval)}
	rows := map[time.Time]*evidence.TimelineRow{}
	row := func(end time.Time) *evidence.TimelineRow {
		if x, ok := rows[end]; ok {
			return x
		}
		x := &evidence.TimelineRow{End: end}
		rows[end] = x
		return x
	}
	kinds := 0

	var soft *evidence.SoftirqEvidence
	var locks *evidence.LockSection
	if r.Net != nil {
		if ps.Softirq != nil {
			soft = &r.Net.Evidence.Softirq
		}
		if ps.Locks != nil {
			locks = &r.Net.Evidence.Locks
		}
	} else {
		soft, locks = r.Softirq, r.Locks
	}
	if r.Net != nil {
		tl.Port = ps.NetOptions.Port
		for _, s := range r.Net.Evidence.Sockets.Sockets {
			tl.FeedingCPUs = unionInts(tl.FeedingCPUs, s.FeedingCPUs(diagnose.ReuseportCrossFeed))
		}
	}
	if soft != nil && len(soft.Intervals) > 0 {
		kinds++
		netRX := ps.Softirq.IntervalNetRX()
		for i, iv := range soft.Intervals {
			x := row(iv.End)
			x.NetRXPerS, x.NetRXShare = ptr(iv.NetRXPerS), ptr(iv.NetRXShare)
			if iv.BusiestCPU >= 0 {
				x.BusiestCPU, x.BusiestShare = ptr(iv.BusiestCPU), ptr(iv.BusiestShare)
			}
			if len(tl.FeedingCPUs) > 0 && i < len(netRX) {
				var sum float64
				for _, c := range tl.FeedingCPUs {
					sum += netRX[i][c]
				}
				x.FeedingNetRXShare = ptr(sum / float64(len(tl.FeedingCPUs)))
			}
		}
	}
	if locks != nil && len(locks.Intervals) > 0 {
		kinds++
		for _, iv := range locks.Intervals {
			x := row(iv.End)
			sock := iv.ByClass["socket-receive-queue"] + iv.ByClass["socket-wakeup"] + iv.ByClass["socket-lock"]
			x.Contentions, x.LockWaitNs, x.SocketLockWaitNs = ptr(iv.Count), ptr(iv.TotalNs), ptr(sock)
		}
	}
	if r.Net != nil {
		ev := r.Net.Evidence
		if len(ev.Queues.Intervals) > 0 {
			kinds++
			for _, iv := range ev.Queues.Intervals {
				x := row(iv.End)
				x.RXPackets, x.TXPackets = ptr(iv.RXPackets), ptr(iv.TXPackets)
			}
		}
		// A sampled drop probe's intervals are estimates; the sockets'
		// own drop counters (sk_drops) are exact: they win then.
		drops, _ := ps.Net.Part(udpdrop.Spec.Name).(*Drops)
		probeDrops := drops != nil && drops.opened() && len(ev.Drops.Intervals) > 0 &&
			(ev.Drops.Estimate == nil || len(ev.Sockets.Intervals) == 0)
		if probeDrops {
			tl.DropSource = "probe"
			for _, iv := range ev.Drops.Intervals {
				row(iv.End).Drops = ptr(iv.Count)
			}
		}
		if len(ev.Sockets.Intervals) > 0 {
			kinds++
			for _, iv := range ev.Sockets.Intervals {
				x := row(iv.End)
				x.Datagrams, x.SocketQueueBytes = iv.Datagrams, iv.QueueBytes
				if !probeDrops && iv.Drops != nil {
					tl.DropSource = "socket"
					x.Drops = iv.Drops
				}
			}
		} else if probeDrops {
			kinds++
		}
	}
	if r.Net != nil && r.Net.Evidence.TCP != nil && len(r.Net.Evidence.TCP.Intervals) > 0 {
		kinds++
		tl.TCPPort = r.Net.Evidence.TCP.Port
		for _, iv := range r.Net.Evidence.TCP.Intervals {
			x := row(iv.End)
			x.ListenOverflows, x.ListenDrops, x.TCPBacklogDrops, x.PassiveOpens = iv.ListenOverflows, iv.ListenDrops, iv.BacklogDrops, iv.PassiveOpens
			if iv.Backlog > 0 {
				x.AcceptQueuePeak, x.AcceptBacklog = ptr(iv.QueuePeak), ptr(iv.Backlog)
			}
		}
	}
	if p := r.JVMPauses; p != nil && len(p.Intervals) > 0 {
		kinds++
		tl.PID = p.PID
		for _, iv := range p.Intervals {
			x := row(iv.End)
			x.JVMGCs, x.JVMGCTimeNs = ptr(iv.YoungGCs+iv.OldGCs), ptr(iv.GCTimeNs)
			x.JVMSafepoints, x.JVMStoppedNs = iv.Safepoints, iv.SafepointTimeNs
		}
	}
	if kinds < 2 {
		return nil
	}
	prev := run.Begin
	ends := make([]time.Time, 0, len(rows))
	for end := range rows {
		ends = append(ends, end)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	for _, end := range ends {
		x := rows[end]
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
		tl.Rows = append(tl.Rows, *x)
	}
	return tl
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
