package gclog

import (
	"math"
	"time"
)

// clock turns event stamps into the time the log covers. A log can hold
// several JVM lifetimes (stdout appended across restarts, a rotated set
// spanning one) and rotated files can be handed over out of order; uptime
// going back tells both apart by whether the JVM's start-up lines came
// before it.
type clock struct {
	wallBase time.Time

	seg      struct{ start, end float64 }
	started  bool
	closed   float64 // seconds of segments before the current one
	segments int
	// header: a JVM's start-up lines were seen since the last stamp.
	header bool

	jumps     []TimeJump
	jumpCount int
}

// backTolerance is how far stamps may go back without meaning anything:
// a record's event waits for its detail while later concurrent phases are
// already out.
const backTolerance = 1.0

// time is seconds since JVM start (uptime), or since the first date stamp
// for logs with dates only.
func (c *clock) time(up float64, wall time.Time) (float64, bool) {
	if !math.IsNaN(up) {
		return up, true
	}
	if !wall.IsZero() {
		if c.wallBase.IsZero() {
			c.wallBase = wall
		}
		return wall.Sub(c.wallBase).Seconds(), true
	}
	return 0, false
}

// observe extends the window to [t, end] and reports whether t starts a
// new JVM lifetime. file and line say where, for jumps.
func (c *clock) observe(t, end float64, file string, line int64) (restart bool) {
	header := c.header
	c.header = false
	if !c.started {
		c.started, c.segments = true, 1
		c.seg.start, c.seg.end = t, end
		return false
	}
	// Compare ends: a unified line is written when its pause ends, so a
	// long pause starts before the stamps of lines written during it.
	if back := c.seg.end - end; back > 0 && (header && back > 1e-3 || back > backTolerance) {
		if !header {
			// Uptime went back and no JVM started: files out of order,
			// or a stretch of the log is missing.
			c.jumpCount++
			if len(c.jumps) < maxSamples {
				c.jumps = append(c.jumps, TimeJump{File: file, Line: line, FromSecs: c.seg.end, ToSecs: t})
			}
		}
		c.closed += c.seg.end - c.seg.start
		c.segments++
		c.seg.start, c.seg.end = t, end
		return true
	}
	c.seg.start = min(c.seg.start, t)
	c.seg.end = max(c.seg.end, end)
	return false
}

func (c *clock) window() Window {
	w := Window{Segments: c.segments, Jumps: c.jumps, JumpCount: c.jumpCount}
	if c.started {
		w.Seconds = c.closed + c.seg.end - c.seg.start
	}
	return w
}
