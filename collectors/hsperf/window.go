package hsperf

// Window integrates heap samples taken through a measurement window into
// what was allocated and promoted. hsperfdata has no allocation counter, so
// allocation is reconstructed the way jstat users do it by hand: Eden
// growth between samples, and across a young GC the Eden that was left to
// fill before it (capacity - used at the last sample) plus what was
// allocated after. That assumes the GC ran because Eden was full, so the
// error per GC is how far from full it was (a GC for another cause, G1's
// region rounding), not how old the last sample was; only several GCs
// between two samples add the assumption that Eden kept its size.
type Window struct {
	First, Last Heap
	samples     int
	// EdenAllocated is the reconstructed allocation in bytes.
	EdenAllocated int64
	// Promoted is old-generation growth across young collections (no full
	// GC in between): objects that survived into the old generation. In G1
	// it also counts humongous allocations, which go straight to old.
	Promoted int64
	// PromotingGCs counts the young collections Promoted was measured
	// over.
	PromotingGCs int64

	// Eden occupancy seen at the last sample before a lone young GC, and
	// Eden growth per GC-free sample interval: EdenAtCollection's inputs.
	edenBeforeGC, edenBeforeGCs int64
	growth, growthIntervals     int64
	// Allocation per GC cycle as the JVM published it at each young GC.
	cycleAllocated, cycles int64
}

// Add feeds the next sample.
func (w *Window) Add(h Heap) {
	if w.samples == 0 {
		w.First, w.Last, w.samples = h, h, 1
		return
	}
	prev := w.Last
	young := h.YoungGCs - prev.YoungGCs
	old := h.OldGCs - prev.OldGCs
	switch {
	case young == 0 && old == 0:
		if d := h.EdenUsed - prev.EdenUsed; d > 0 {
			w.EdenAllocated += d
			w.growth += d
		}
		w.growthIntervals++
	default:
		if old == 0 && h.HasCycle && h.CycleAllocated > 0 {
			// Only the last of several GCs between two samples is
			// visible: one cycle.
			w.cycleAllocated += h.CycleAllocated
			w.cycles++
		}
		if young == 1 && old == 0 {
			w.edenBeforeGC += prev.EdenUsed
			w.edenBeforeGCs++
		}
		// The first collection emptied the Eden we last saw partly full;
		// any further ones between two samples each consumed a whole Eden.
		rest := max(prev.EdenCapacity-prev.EdenUsed, 0)
		extra := max(young+old-1, 0) * prev.EdenCapacity
		w.EdenAllocated += rest + extra + h.EdenUsed
		if old == 0 {
			if d := h.OldUsed - prev.OldUsed; d > 0 {
				w.Promoted += d
			}
			w.PromotingGCs += young
		}
	}
	w.Last = h
	w.samples++
}

// EdenAtCollection is how much Eden the application filled between two
// young GCs: the allocation → young-GC model divides by it. G1 sizes its
// young generation after every GC and starts one when that many regions
// are used, which is not the Eden capacity hsperfdata shows (123 of 130
// regions is typical), so dividing by the capacity predicts too few
// collections.
//
// The JVM publishes each cycle's allocation at every young GC
// (sun.gc.tlab.alloc): the mean over the window's GCs is the answer
// (source "hsperfdata-cycle"). Without that counter it is estimated from
// the occupancy at the last sample before each lone young GC plus half an
// interval's growth (source "hsperfdata-occupancy"), at most the capacity.
// ok is false when the window saw no young GC.
func (w *Window) EdenAtCollection() (bytes int64, source string, ok bool) {
	if w.cycles > 0 {
		return w.cycleAllocated / w.cycles, "hsperfdata-cycle", true
	}
	if w.edenBeforeGCs == 0 {
		return 0, "", false
	}
	est := w.edenBeforeGC / w.edenBeforeGCs
	if w.growthIntervals > 0 {
		est += w.growth / w.growthIntervals / 2
	}
	if c := w.Last.EdenCapacity; c > 0 && est > c {
		est = c
	}
	return est, "hsperfdata-occupancy", true
}

// Samples is how many heap samples the window saw.
func (w *Window) Samples() int { return w.samples }

// YoungGCs is the number of young collections in the window.
func (w *Window) YoungGCs() int64 { return w.Last.YoungGCs - w.First.YoungGCs }

// OldGCs is the number of full/old collections in the window.
func (w *Window) OldGCs() int64 { return w.Last.OldGCs - w.First.OldGCs }
