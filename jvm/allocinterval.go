package jvm

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/jvm/attach"
)

// AutoAllocSamples is how many allocation samples an interval chosen
// from the JVM's allocation rate gives a window at that rate: the whole
// process's bytes to ±2/√n = ±4 % (two standard deviations), and the
// request threads' to ±5 % while they hold two thirds of them or more.
// Each sample costs the allocating thread 15-30 µs, so the JVM pays
// 2500 ÷ window samples a second whatever it allocates: 250 a second,
// 0.4-0.8 % of a core, over the default 10 s.
const AutoAllocSamples = 2500

// MinAutoAllocInterval is the least interval the rate may choose. A JVM
// quiet before the window that a flood hits during it pays its rate ÷
// interval in samples: at 16 KiB, 100 MB/s costs 6400 samples a second,
// 10-19 % of a core, for the window's length (--alloc-interval sets the
// interval instead).
const MinAutoAllocInterval = 16 << 10

// Before the profiler starts, perfscope reads hsperfdata for up to
// rateWaitMax, until Eden grew by freshGrowth: G1 publishes Eden's use one
// region at a time, and a smaller growth is mostly that step.
const (
	rateWaitMax = 2 * time.Second
	freshGrowth = 16 << 20
	rateSpanMin = time.Second
)

// AllocRate is the JVM's allocation rate before the window, from
// hsperfdata, and how it was read.
type AllocRate struct {
	BytesPerSecond float64
	// Over is the span it was measured over; How says from what.
	Over time.Duration
	How  string
}

// AutoAllocInterval is the sampling interval that gives a window of
// length window at rate bytes/s AutoAllocSamples samples, in whole KiB,
// at least MinAutoAllocInterval.
func AutoAllocInterval(rate float64, window time.Duration) int64 {
	n := int64(rate*window.Seconds()/AutoAllocSamples) >> 10 << 10
	return max(n, MinAutoAllocInterval)
}

// allocRateBefore measures the allocation rate from hsperfdata before the
// profiler starts: Eden's growth (across young GCs, as the window counts
// it) while perfscope reads every DefaultSampleEvery, as soon as it grew
// by freshGrowth, at most for rateWaitMax. A JVM that allocated less in
// that time is quiet: its rate is Eden's use since its last young GC ended
// (Eden fills from empty after each; since it started when it never
// collected), a longer span, when that is at least rateSpanMin. Only the
// fresh reading follows a change of traffic: the span since the last GC
// may hold a burst (a warm-up) that is over. ok is false when hsperfdata
// says nothing usable (JDK 25's Serial and Parallel publish Eden's use
// only at a GC): the interval then stays the default.
func allocRateBefore(ctx context.Context, fs hsperf.FS, path string, first hsperf.Heap) (AllocRate, bool) {
	var w edenGrowth
	w.add(first)
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return AllocRate{}, false
		case <-time.After(DefaultSampleEvery):
		}
		h, err := heapNow(fs, path)
		if err != nil {
			return AllocRate{}, false
		}
		w.add(h)
		waited := time.Since(start)
		if w.bytes >= freshGrowth {
			return AllocRate{BytesPerSecond: float64(w.bytes) / waited.Seconds(), Over: waited, How: "Eden's growth"}, true
		}
		if waited < rateWaitMax {
			continue
		}
		clock := h.Clock
		if clock == 0 {
			clock = time.Since(h.VMStarted) // JDK 25 publishes no clock
		}
		if since := clock - h.YoungGCEnded; since >= rateSpanMin && h.EdenUsed > 0 {
			how := "Eden's use since the last young GC"
			if h.YoungGCs == 0 {
				how = "Eden's use since the JVM started"
			}
			return AllocRate{BytesPerSecond: float64(h.EdenUsed) / since.Seconds(), Over: since, How: how}, true
		}
		if w.bytes > 0 {
			return AllocRate{BytesPerSecond: float64(w.bytes) / waited.Seconds(), Over: waited, How: "Eden's growth"}, true
		}
		return AllocRate{}, false
	}
}

// edenGrowth adds up what was allocated between heap readings: Eden's
// growth, and across one young GC the cycle's allocation the JVM
// published at it less what Eden held at the reading before, plus what it
// holds now. hsperf.Window's reconstruction across a GC (the Eden left to
// fill before it) takes G1's Eden capacity for where the GC came, and G1
// collects before its capacity is full: once, a GC inside a 2 s reading
// made the rate 60 % high and the interval gave 1500 samples, not 2500.
type edenGrowth struct {
	last  hsperf.Heap
	seen  bool
	bytes int64
}

func (g *edenGrowth) add(h hsperf.Heap) {
	if !g.seen {
		g.last, g.seen = h, true
		return
	}
	prev := g.last
	g.last = h
	switch young, old := h.YoungGCs-prev.YoungGCs, h.OldGCs-prev.OldGCs; {
	case young == 0 && old == 0:
		g.bytes += max(0, h.EdenUsed-prev.EdenUsed)
	case young == 1 && old == 0 && h.HasCycle && h.CycleAllocated > 0:
		g.bytes += max(0, h.CycleAllocated-prev.EdenUsed) + h.EdenUsed
	default:
		// Several GCs: the window's reconstruction of that step alone.
		var w hsperf.Window
		w.Add(prev)
		w.Add(h)
		g.bytes += w.EdenAllocated
	}
}

// chooseAllocInterval picks the allocation sampling interval when none
// was given: from the allocation rate before the window, so that the
// window has AutoAllocSamples samples — a ±5 % bound — whatever the
// JVM allocates (at async-profiler's 512 KiB a service allocating 5 MB/s
// had about 120 samples in 10 s: ±18 %). Under perfscope's own load the
// rate before it says nothing of the rate during it: the default stays.
func (o *Options) chooseAllocInterval(ctx context.Context, t *attach.Target, first hsperf.Heap, res *Result) int64 {
	if o.Load != nil {
		res.IntervalNote = fmt.Sprintf("--load: the allocation rate before the load says nothing of the rate during it; async-profiler's %s kept", sizeText(asprof.DefaultAllocInterval))
		return asprof.DefaultAllocInterval
	}
	rate, ok := allocRateBefore(ctx, o.FS, t.HsperfPath, first)
	if !ok {
		res.IntervalNote = fmt.Sprintf("the allocation rate before the window could not be read from hsperfdata; async-profiler's %s kept", sizeText(asprof.DefaultAllocInterval))
		return asprof.DefaultAllocInterval
	}
	res.IntervalAuto, res.RateBefore = true, &rate
	interval := AutoAllocInterval(rate.BytesPerSecond, o.Duration)
	res.IntervalNote = fmt.Sprintf("%s, chosen from the %.1f MB/s the JVM allocated before the window (%s over %.1fs) for %d samples over %v",
		sizeText(interval), rate.BytesPerSecond/1e6, rate.How, rate.Over.Seconds(), AutoAllocSamples, o.Duration)
	if interval == MinAutoAllocInterval {
		res.IntervalNote += " (its floor: a JVM allocating less gets fewer samples)"
	}
	return interval
}

// sizeText is a byte count as the flags take it: 512k, 1.5m, 900.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "m"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}
