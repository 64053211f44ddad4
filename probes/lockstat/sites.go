package lockstat

import (
	"math"
	"time"
)

// SiteWait is the contention of one call site over a window.
type SiteWait struct {
	// Sampled is what was measured: the contentions whose stack was taken
	// (for the Unsampled site of a lock kind without any: nothing).
	Sampled WaitStats
	// Estimated is the site's share of every contention of its lock kind:
	// Sampled's count and total wait, each scaled by the kind's ratio of
	// all contentions (or wait) to sampled ones. Max is Sampled's, the
	// longest wait seen with this stack. With StackEvery 1 it is Sampled.
	Estimated WaitStats
}

// SiteWaits scales the sampled sites of s to every contention. The probe
// takes the stack of about 1 in StackEvery contentions but times and counts
// each one under its lock flags, so for every lock kind (flags) the total
// count and wait are exact and the sampled sites tell how they split. Each
// site's estimate is its sampled count (wait) × the kind's all/sampled count
// (wait) ratio: the estimates of one kind add up to its exact totals (up to
// rounding of counts), so sums over sites — per class, or all — are
// unbiased, while a single site's estimate has the sampling error of its
// number of samples. Wait is scaled by its own ratio because a sampled wait
// is timed from after the unwind and is shorter than an unsampled one.
//
// A lock kind whose contentions were all unsampled keeps one Unsampled
// site with its exact count and wait. Without unsampled contention (StackEvery
// 1) the estimates are the measurements.
func (s Snapshot) SiteWaits() map[SiteKey]SiteWait {
	type kind struct{ all, sampled WaitStats }
	kinds := map[uint32]*kind{}
	for k, w := range s.Sites {
		kd := kinds[k.Flags]
		if kd == nil {
			kd = &kind{}
			kinds[k.Flags] = kd
		}
		kd.all = kd.all.add(w)
		if k.StackID != Unsampled {
			kd.sampled = kd.sampled.add(w)
		}
	}
	ratio := func(all, sampled float64) float64 {
		if sampled == 0 {
			return 1
		}
		return all / sampled
	}
	out := make(map[SiteKey]SiteWait, len(s.Sites))
	for k, w := range s.Sites {
		kd := kinds[k.Flags]
		if k.StackID == Unsampled {
			if kd.sampled.Count == 0 {
				out[k] = SiteWait{Estimated: w}
			}
			continue
		}
		share := float64(w.Count) * ratio(float64(kd.all.Count), float64(kd.sampled.Count))
		wait := float64(w.Total) * ratio(float64(kd.all.Total), float64(kd.sampled.Total))
		if kd.sampled.Total == 0 && kd.sampled.Count > 0 {
			// Every sampled wait rounded to 0 ns: split the kind's wait
			// by count instead.
			wait = float64(kd.all.Total) * float64(w.Count) / float64(kd.sampled.Count)
		}
		out[k] = SiteWait{Sampled: w, Estimated: WaitStats{
			Count: uint64(math.Round(share)), Total: time.Duration(math.Round(wait)), Max: w.Max,
		}}
	}
	return out
}
