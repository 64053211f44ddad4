package budget

import (
	"math"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// Coverage is how the budget attached each hook group over a window: the
// parts read it to scale what their probes counted and to say how each
// number was obtained. A nil Coverage (no budget) is exact throughout.
type Coverage struct {
	groups map[string]groupCoverage
	// live, during a window: the governor, for timelines.
	live *Governor
}

type groupCoverage struct {
	exact    bool
	estimate *evidence.Estimate
	spans    []span
}

// Estimate is how group's counts were obtained over the window; nil when
// exact (or the group is unknown: not governed).
func (c *Coverage) Estimate(group string) *evidence.Estimate {
	if c == nil {
		return nil
	}
	gc, ok := c.groups[group]
	if !ok || gc.exact {
		return nil
	}
	e := *gc.estimate
	return &e
}

// Scale is the factor from what group's windows counted to the window.
func (c *Coverage) Scale(group string) float64 {
	if e := c.Estimate(group); e != nil {
		return e.Scale
	}
	return 1
}

// ScaleBetween is the factor for counts between a and b (a tick of a
// timeline): the span over the group's attached time in it; 0 when it
// was never attached then (the interval's counts are unknown, not zero),
// 1 when always.
func (c *Coverage) ScaleBetween(group string, a, b time.Time) float64 {
	if c == nil || !b.After(a) {
		return 1
	}
	var spans []span
	if c.live != nil {
		spans = c.live.spansOf(group, b)
	} else if gc, ok := c.groups[group]; ok && !gc.exact {
		spans = gc.spans
	}
	if spans == nil { // never detached: exact
		return 1
	}
	var on time.Duration
	for _, s := range spans {
		from, to := maxTime(s.from, a), minTime(s.to, b)
		if to.After(from) {
			on += to.Sub(from)
		}
	}
	if on <= 0 {
		return 0
	}
	return float64(b.Sub(a)) / float64(on)
}

// spansOf is a group's attached spans so far, the open one up to now;
// nil when the group is not governed.
func (g *Governor) spansOf(group string, now time.Time) []span {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, gg := range g.groups {
		if gg.hg.Name != group {
			continue
		}
		if !gg.detached {
			return nil
		}
		out := append([]span{}, gg.spans...)
		if !gg.onSince.IsZero() {
			out = append(out, span{gg.onSince, now})
		}
		return out
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Scaled is n sampled events scaled by k to the whole window.
func Scaled(n uint64, k float64) uint64 {
	if k == 1 {
		return n
	}
	return uint64(math.Round(float64(n) * k))
}

// ScaledRows scales every count of a [cpu][slot] table.
func ScaledRows(rows [][]uint64, k float64) [][]uint64 {
	if k == 1 {
		return rows
	}
	out := make([][]uint64, len(rows))
	for i, r := range rows {
		out[i] = make([]uint64, len(r))
		for j, n := range r {
			out[i][j] = Scaled(n, k)
		}
	}
	return out
}
