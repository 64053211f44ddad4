package golang

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// DefaultMemProfileRate is the runtime's sampling rate when nothing
// changed it: one sample per 512 KiB allocated on average.
const DefaultMemProfileRate = 512 * 1024

// z95 is the normal quantile of a two-sided 95 % bound.
const z95 = 1.96

// SampleProbability is the chance that the runtime samples an object of
// size bytes at rate: its sampling points form a Poisson process over the
// bytes allocated, one per rate bytes on average, and an object is sampled
// when at least one point falls in it (runtime/pprof's scaleHeapSample).
// Rate 1 samples every allocation; rate 0 none.
func SampleProbability(size uint64, rate int64) float64 {
	switch {
	case rate <= 0:
		return 0
	case rate == 1 || size == 0:
		return 1
	}
	return -math.Expm1(-float64(size) / float64(rate))
}

// Weighted is an unbiased estimate of what a set of samples stands for,
// with the variance of each figure (Horvitz–Thompson: objects are sampled
// independently, each with its own probability).
type Weighted struct {
	Bytes, Objects       float64
	BytesVar, ObjectsVar float64
	Samples              uint64
}

// Add counts n samples of size bytes at rate.
func (w *Weighted) Add(size, n uint64, rate int64) {
	p := SampleProbability(size, rate)
	if p <= 0 {
		return
	}
	s, c := float64(size), float64(n)
	w.Samples += n
	w.Objects += c / p
	w.Bytes += c * s / p
	// Each of the c sampled objects contributes (1−p)/p² to the
	// estimated variance of the object count, s² times that to bytes.
	v := c * (1 - p) / (p * p)
	w.ObjectsVar += v
	w.BytesVar += v * s * s
}

// Merge adds o.
func (w *Weighted) Merge(o Weighted) {
	w.Bytes += o.Bytes
	w.Objects += o.Objects
	w.BytesVar += o.BytesVar
	w.ObjectsVar += o.ObjectsVar
	w.Samples += o.Samples
}

// BytesBound is the 95 % bound (±) of Bytes.
func (w Weighted) BytesBound() float64 { return z95 * math.Sqrt(w.BytesVar) }

// AllocSample is one group of identical samples: a symbolized stack (leaf
// first, nil when the stack was not kept), the object size and how many.
type AllocSample struct {
	Frames []Frame
	Size   uint64
	Count  uint64
}

// PerRequestBound combines the samples' 95 % bound on a total with the
// request count's relative uncertainty into the bound on total/requests.
func PerRequestBound(total, bound float64, requests int64, requestsUncertainty float64) float64 {
	if requests <= 0 || total <= 0 {
		return 0
	}
	per := total / float64(requests)
	rel := math.Hypot(bound/total, requestsUncertainty)
	return per * rel
}

// runtimeFrame says whether a frame belongs to the runtime's allocator
// and its helpers, trimmed from the leaf to find the site: package
// runtime and the runtime-internal packages (internal/runtime/maps holds
// Go 1.24's maps).
func runtimeFrame(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/runtime/")
}

// poolNewFrame says whether a stack runs inside sync.(*Pool).Get, i.e. the
// allocation is a pool's New after a miss.
func poolNewFrame(fn string) bool { return fn == "sync.(*Pool).Get" }

// siteKey groups samples into sites.
type siteKey struct {
	fn, file string
	line     int
	size     uint64
}

// Allocations is the analysis of one window's samples.
type Allocations struct {
	Total Weighted
	// NoSite is the part of Total whose samples had no stack.
	NoSite Weighted
	Sites  []evidence.GoAllocSite
	Stacks []evidence.GoAllocStack
}

// AnalyzeAllocations weights every sample, groups them into sites (the
// first frame outside the runtime, and the size) and stacks, and fills
// the per-request figures when requests > 0. top limits the sites (0: all).
func AnalyzeAllocations(samples []AllocSample, rate int64, requests int64, top int) Allocations {
	var a Allocations
	type site struct {
		evidence.GoAllocSite
		w Weighted
	}
	sites := map[siteKey]*site{}
	stacks := map[string]*evidence.GoAllocStack{}
	for _, s := range samples {
		var w Weighted
		w.Add(s.Size, s.Count, rate)
		a.Total.Merge(w)
		if len(s.Frames) == 0 {
			a.NoSite.Merge(w)
			continue
		}
		i := 0
		for i < len(s.Frames)-1 && runtimeFrame(s.Frames[i].Function) {
			i++
		}
		leaf := s.Frames[i]
		k := siteKey{leaf.Function, leaf.File, leaf.Line, s.Size}
		st := sites[k]
		if st == nil {
			st = &site{GoAllocSite: evidence.GoAllocSite{Function: leaf.Function, File: leaf.File, Line: leaf.Line, Size: int64(s.Size)}}
			for _, f := range s.Frames[i:] {
				if poolNewFrame(f.Function) {
					st.InPoolNew = true
				}
			}
			for _, f := range s.Frames[i+1:] {
				if !runtimeFrame(f.Function) && !poolNewFrame(f.Function) {
					st.Caller = f.Function
					break
				}
			}
			sites[k] = st
		}
		st.w.Merge(w)
		names := make([]string, 0, len(s.Frames))
		for j := len(s.Frames) - 1; j >= 0; j-- {
			names = append(names, s.Frames[j].Function)
		}
		key := strings.Join(names, ";")
		if stacks[key] == nil {
			stacks[key] = &evidence.GoAllocStack{Frames: names}
		}
		stacks[key].Bytes += w.Bytes
	}
	for _, st := range sites {
		e := st.GoAllocSite
		e.Bytes, e.Objects, e.Samples = st.w.Bytes, st.w.Objects, int64(st.w.Samples)
		if a.Total.Bytes > 0 {
			e.Share = e.Bytes / a.Total.Bytes
		}
		if requests > 0 {
			e.BytesPerRequest = evidence.Float(e.Bytes / float64(requests))
			e.ObjectsPerRequest = evidence.Float(e.Objects / float64(requests))
		}
		a.Sites = append(a.Sites, e)
	}
	sort.Slice(a.Sites, func(i, j int) bool {
		x, y := a.Sites[i], a.Sites[j]
		if x.Bytes != y.Bytes {
			return x.Bytes > y.Bytes
		}
		return fmt.Sprint(x.Function, x.Line, x.Size) < fmt.Sprint(y.Function, y.Line, y.Size)
	})
	if top > 0 && len(a.Sites) > top {
		a.Sites = a.Sites[:top]
	}
	for _, st := range stacks {
		a.Stacks = append(a.Stacks, *st)
	}
	sort.Slice(a.Stacks, func(i, j int) bool {
		if a.Stacks[i].Bytes != a.Stacks[j].Bytes {
			return a.Stacks[i].Bytes > a.Stacks[j].Bytes
		}
		return strings.Join(a.Stacks[i].Frames, ";") < strings.Join(a.Stacks[j].Frames, ";")
	})
	return a
}

// PoolUse is one pool's counts with its name.
type PoolUse struct {
	Address          uint64
	Name             string
	Gets, Puts, News uint64
	// NewSeen: the New call site is probed, so News counts misses.
	NewSeen bool
	// HasNew: the pool's New field, read from the running program (nil:
	// not readable).
	HasNew *bool
	// Bounds, when the counts are estimates (the hooks were attached
	// for part of the window): their 95 % bounds.
	Bounds *[3]float64
}

// AnalyzePools turns pool counts into evidence, most Gets first.
func AnalyzePools(pools []PoolUse, requests int64) []evidence.GoPool {
	out := make([]evidence.GoPool, 0, len(pools))
	for _, p := range pools {
		e := evidence.GoPool{Address: fmt.Sprintf("%#x", p.Address), Name: p.Name, Gets: int64(p.Gets), Puts: int64(p.Puts), News: int64(p.News)}
		e.HasNew = p.HasNew
		if p.Bounds != nil {
			e.GetsError, e.PutsError, e.NewsError = evidence.Float(p.Bounds[0]), evidence.Float(p.Bounds[1]), evidence.Float(p.Bounds[2])
		}
		// Without reading New, a pool whose Gets never reached it either
		// hit every time or has no New function: only News > 0 proves
		// it has one. A pool without New returns nil on a miss, unseen.
		hasNew := p.News > 0 || (p.HasNew != nil && *p.HasNew)
		if p.NewSeen && p.Gets > 0 && hasNew {
			e.HitRate = evidence.Float(1 - math.Min(1, float64(p.News)/float64(p.Gets)))
		}
		if requests > 0 {
			e.GetsPerRequest = evidence.Float(float64(p.Gets) / float64(requests))
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Gets != out[j].Gets {
			return out[i].Gets > out[j].Gets
		}
		return out[i].Address < out[j].Address
	})
	return out
}
