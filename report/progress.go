package report

import (
	"fmt"
	"io"
	"time"
)

// Progress draws "time left, events/s" on a terminal's stderr, and
// nothing when it is off (stderr a pipe or a file).
type Progress struct {
	w       io.Writer
	enabled bool
	end     time.Time
	drawn   bool
}

// NewProgress draws on w, when enabled, for a window of d from now.
func NewProgress(w io.Writer, enabled bool, d time.Duration) *Progress {
	return &Progress{w: w, enabled: enabled, end: time.Now().Add(d)}
}

// Update redraws the line at now with the NET_RX rate.
func (p *Progress) Update(now time.Time, ratePerS float64) {
	if !p.enabled {
		return
	}
	left := p.end.Sub(now).Round(time.Second)
	fmt.Fprintf(p.w, "\r\033[K%v left, %s NET_RX/s", left, Count(ratePerS))
	p.drawn = true
}

// Clear erases the line, if one was drawn.
func (p *Progress) Clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// Enabled says whether the line is drawn.
func (p *Progress) Enabled() bool { return p.enabled }

// Left redraws the line with the time left alone.
func (p *Progress) Left(left time.Duration) {
	if !p.enabled {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%v left", left.Round(time.Second))
	p.drawn = true
}
