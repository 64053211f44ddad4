package flame

import "regexp"

// Filter selects stacks by their frames.
type Filter struct {
	// Include keeps only stacks with at least one frame matching.
	Include *regexp.Regexp
	// Exclude drops stacks with any frame matching; it wins over Include.
	Exclude *regexp.Regexp
}

// Filter returns a new profile with the stacks f selects. Each distinct
// frame name is matched once, not once per stack.
func (p *Profile) Filter(f Filter) *Profile {
	out := New(p.Unit)
	out.SampleType = p.SampleType
	if f.Include == nil && f.Exclude == nil {
		_ = out.Merge(p)
		return out
	}
	const (
		unknown = iota
		matches
		misses
	)
	incl := make([]uint8, len(p.names))
	excl := make([]uint8, len(p.names))
	test := func(cache []uint8, re *regexp.Regexp, id uint32) bool {
		if cache[id] == unknown {
			cache[id] = misses
			if re.MatchString(p.names[id]) {
				cache[id] = matches
			}
		}
		return cache[id] == matches
	}
	var frames []uint32
	var walk func(n int32, included bool)
	walk = func(n int32, included bool) {
		nd := p.node(n)
		if n != 0 {
			if f.Exclude != nil && test(excl, f.Exclude, nd.name) {
				return
			}
			frames = append(frames, nd.name)
			defer func() { frames = frames[:len(frames)-1] }()
			if !included && (f.Include == nil || test(incl, f.Include, nd.name)) {
				included = true
			}
			if included && nd.self > 0 {
				out.addIDs(p, frames, nd.self)
			}
		}
		for c := nd.firstChild; c != noNode; c = p.node(c).nextSibling {
			walk(c, included)
		}
	}
	walk(0, false)
	return out
}

// addIDs adds a stack given as name ids of q.
func (p *Profile) addIDs(q *Profile, ids []uint32, value int64) {
	n := int32(0)
	p.node(0).total += value
	for _, id := range ids {
		n = p.child(n, p.intern(q.names[id]))
		p.node(n).total += value
	}
	p.node(n).self += value
}
