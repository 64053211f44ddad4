package flame

import (
	"cmp"
	"slices"
)

// FunctionCost is one function's share of a profile.
type FunctionCost struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Self is the value of stacks whose leaf is this function; Total of
	// stacks containing it anywhere (counted once under recursion).
	Self  int64 `json:"self"`
	Total int64 `json:"total"`
}

// Functions sums self and total values per function name, largest self
// first (ties by total, then name); limit ≤ 0 means all.
func (p *Profile) Functions(limit int) []FunctionCost { return p.functions(1, limit) }

// FunctionsUnderRoot is Functions without the first frame of each stack:
// the synthetic root frames (a command name, "cpu-N", "comm-pid") that
// perfscope profile puts under stacks are no functions.
func (p *Profile) FunctionsUnderRoot(limit int) []FunctionCost { return p.functions(2, limit) }

// functions counts frames from depth first (1 is the first frame).
func (p *Profile) functions(first, limit int) []FunctionCost {
	self := make([]int64, len(p.names))
	total := make([]int64, len(p.names))
	onPath := make([]int32, len(p.names))
	var walk func(n int32, depth int)
	walk = func(n int32, depth int) {
		nd := p.node(n)
		if depth >= first {
			self[nd.name] += nd.self
			if onPath[nd.name] == 0 {
				total[nd.name] += nd.total
			}
			onPath[nd.name]++
			defer func() { onPath[nd.name]-- }()
		}
		for c := nd.firstChild; c != noNode; c = p.node(c).nextSibling {
			walk(c, depth+1)
		}
	}
	walk(0, 0)
	var out []FunctionCost
	for id := 1; id < len(p.names); id++ {
		if total[id] > 0 {
			out = append(out, FunctionCost{Name: p.names[id], Kind: KindOf(p.names[id]).String(), Self: self[id], Total: total[id]})
		}
	}
	slices.SortFunc(out, func(a, b FunctionCost) int {
		return cmp.Or(cmp.Compare(b.Self, a.Self), cmp.Compare(b.Total, a.Total), cmp.Compare(a.Name, b.Name))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// FunctionChange is how one function's self value moved between two
// profiles, "before" scaled to "after"'s total unless the diff is absolute.
type FunctionChange struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Delta  float64 `json:"delta"`
}

// Changes lists functions by the size of the change of their self value,
// largest first; limit ≤ 0 means all.
func (d *Diff) Changes(limit int) []FunctionChange {
	k := 1.0
	if !d.Options.Absolute && d.Before.Total() > 0 {
		k = float64(d.After.Total()) / float64(d.Before.Total())
	}
	by := map[string]*FunctionChange{}
	add := func(p *Profile, after bool, scale float64) {
		for _, f := range p.Functions(0) {
			c := by[f.Name]
			if c == nil {
				c = &FunctionChange{Name: f.Name, Kind: f.Kind}
				by[f.Name] = c
			}
			if after {
				c.After += float64(f.Self) * scale
			} else {
				c.Before += float64(f.Self) * scale
			}
		}
	}
	add(d.Before, false, k)
	add(d.After, true, 1)
	out := make([]FunctionChange, 0, len(by))
	for _, c := range by {
		c.Delta = c.After - c.Before
		if c.Delta != 0 {
			out = append(out, *c)
		}
	}
	abs := func(v float64) float64 { return max(v, -v) }
	slices.SortFunc(out, func(a, b FunctionChange) int {
		return cmp.Or(cmp.Compare(abs(b.Delta), abs(a.Delta)), cmp.Compare(a.Name, b.Name))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
