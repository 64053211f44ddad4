package diagnose

import (
	"fmt"
	"math"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// Heap sizing. Several GC findings end in "give the JVM more heap"; they
// must name one size, never one that shrinks the heap another grows, so
// they all take it from heapSizing, which weighs every constraint the log
// gives and shows its arithmetic.

const (
	// liveSetFactor: a heap of three to four times the live set leaves the
	// old generation room for garbage between collections (Oracle's Java
	// performance guidance; the low end is taken).
	liveSetFactor = 3
	// g1MaxYoungShare is G1's default G1MaxNewSizePercent: Eden and
	// survivors grow to at most 60% of the heap.
	g1MaxYoungShare = 0.6
	// youngPerEden: Eden plus two survivors at the default SurvivorRatio=8.
	youngPerEden = 1.25
)

// heapSize is one recommended heap.
type heapSize struct {
	// Xmx is the heap to run with, in bytes; Current the heap the log shows
	// (0: not logged). Grow is Xmx > Current.
	Xmx, Current float64
	Grow         bool
	// Xmn is the young generation for collectors sized by -Xmn (0: keep).
	Xmn float64
	// Terms are the constraints, "3 × live set 137 MB = 411 MB", whose
	// maximum Xmx is.
	Terms []string
}

// heapSizing computes the heap from: the heap in use (recommendations
// never shrink it), three times the live set after full GC, the young
// generation the allocation rate needs for edenNeed (0: none), and for ZGC
// and Shenandoah the room for what is allocated during the longest cycle.
func heapSizing(g evidence.GC, edenNeed float64) heapSize {
	h := heapSize{Current: g.HeapBytes}
	add := func(v float64, term string) {
		if v <= 0 {
			return
		}
		h.Terms = append(h.Terms, term)
		h.Xmx = math.Max(h.Xmx, v)
	}
	add(g.HeapBytes, fmt.Sprintf("the heap in use %s", mib(g.HeapBytes)))
	live := g.LiveAfterFullBytes
	add(liveSetFactor*live, fmt.Sprintf("%d × the live set after full GC %s = %s", liveSetFactor, mib(live), mib(liveSetFactor*live)))
	if edenNeed > 0 {
		if isG1(g) {
			add(edenNeed/g1MaxYoungShare, fmt.Sprintf("Eden %s / G1's 60%% young share = %s", mib(edenNeed), mib(edenNeed/g1MaxYoungShare)))
		} else {
			h.Xmn = edenNeed * youngPerEden
			old := math.Max(2*live, g.HeapBytes-g.EdenBytes*youngPerEden)
			add(h.Xmn+old, fmt.Sprintf("young %s (Eden %s + survivors) + old %s = %s", mib(h.Xmn), mib(edenNeed), mib(old), mib(h.Xmn+old)))
		}
	}
	if c := g.Cycles; c != nil && (g.Collector == "ZGC" || g.Collector == "Shenandoah") && g.AllocRate > 0 {
		during := g.AllocRate * float64(c.MaxNs) / 1e9
		floor := float64(0)
		if n := len(g.LiveSet.Samples); n > 0 {
			floor = float64(g.LiveSet.Samples[n-1].Bytes)
		}
		add(floor+2*during, fmt.Sprintf("live %s + 2 × allocation during the longest cycle (%s/s × %s = %s) = %s",
			mib(floor), mib(g.AllocRate), ms(float64(c.MaxNs)), mib(during), mib(floor+2*during)))
	}
	// Whole megabytes, never below what the log shows in use.
	h.Xmx = math.Ceil(h.Xmx/(1<<20)) * (1 << 20)
	h.Grow = h.Xmx > g.HeapBytes && g.HeapBytes > 0
	return h
}

// Known reports whether any constraint gave a size.
func (h heapSize) Known() bool { return h.Xmx > 0 }

// Arithmetic is "max(a, b, c) = X".
func (h heapSize) Arithmetic() string {
	return fmt.Sprintf("max(%s) = %s", strings.Join(h.Terms, "; "), mib(h.Xmx))
}

// Flag is "-Xmx2253m".
func (h heapSize) Flag() string { return fmt.Sprintf("-Xmx%dm", int(h.Xmx/(1<<20))) }
