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
		}
	default:
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

// Samples is how many heap samples the window saw.
func (w *Window) Samples() int { return w.samples }

// YoungGCs is the number of young collections in the window.
func (w *Window) YoungGCs() int64 { return w.Last.YoungGCs - w.First.YoungGCs }

// OldGCs is the number of full/old collections in the window.
func (w *Window) OldGCs() int64 { return w.Last.OldGCs - w.First.OldGCs }
