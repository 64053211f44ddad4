package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/cpuprofile"
)

// Parts are one run's parts by capability, built fresh for one session
// by whoever chose them (a recipe's plan): a one-shot run measures one
// window; a continuous run opens them once (Open(src, ps.List()...)) and
// measures window after window, calling Sections after each. A nil part
// is not in the run; with Net, the softirq, lock and profile parts are
// the network run's own (Net holds them too).
type Parts struct {
	Softirq *Softirq
	Locks   *Locks
	Profile *Profile
	Pauses  *JVMPauses
	OffCPU  *OffCPU
	Net     *NetParts
	// NetOptions are the network run's interface, port and process.
	NetOptions NetOptions
	// Interval is the window's timeline interval: with one, Sections
	// joins the parts' intervals by tick.
	Interval time.Duration
}

// List is the parts to open, in the order they open and read.
func (ps *Parts) List() []Part {
	parts := partsOf(ps.Softirq, ps.Locks, ps.Profile)
	if ps.Net != nil {
		parts = ps.Net.List() // the softirq, lock and profile parts among them
	}
	return append(parts, partsOf(ps.Pauses, ps.OffCPU)...)
}

// Opened checks, once the parts are open, the probes a run outside a
// network run cannot do without (a network run reports a missing probe
// as an unavailable section instead, as `perfscope udp` does).
func (ps *Parts) Opened() error {
	if ps.Net != nil {
		// The profile is optional in a network run, but not the event
		// asked for by name: a run without it would not be the one asked.
		if ps.Profile != nil && ps.Profile.opts.Event == cpuprofile.EventCycles {
			if err := ps.Profile.OpenErr(); err != nil {
				return ps.Profile.explain(err)
			}
		}
		return nil
	}
	if ps.Locks != nil {
		if err := ps.Locks.OpenErr(); err != nil {
			return fmt.Errorf("lock contention: %w", err)
		}
	}
	if ps.Profile != nil {
		if err := ps.Profile.OpenErr(); err != nil {
			return ps.Profile.explain(err)
		}
	}
	return nil
}

// OpenFailed is err, from opening the parts, in the words of the part
// that failed: a profile's refused event is named.
func (ps *Parts) OpenFailed(err error) error {
	if ps.Profile != nil && ps.Net == nil {
		return ps.Profile.explain(err)
	}
	return err
}

// Sections are what one window of the parts measured, per section.
type Sections struct {
	Run Run
	// Net holds the network section; the softirq, lock and profile
	// evidence of a network run is inside it.
	Net       *NetResult
	Softirq   *evidence.SoftirqEvidence
	Locks     *evidence.LockSection
	Profile   *ProfileResult
	JVMPauses *evidence.JVMPauses
	OffCPU    *evidence.OffCPU
	Timeline  *evidence.Timeline
}

// Sections assembles the evidence of the window just measured. A profile
// part's frames are named here: call it after the session has closed in
// a one-shot run.
func (ps *Parts) Sections(ctx context.Context, src Sources, run Run) Sections {
	s := Sections{Run: run}
	if ps.Net != nil {
		res := ps.Net.Assemble(src, ps.NetOptions, run)
		res.Run = run
		s.Net = &res
	} else {
		if ps.Softirq != nil {
			ev := ps.Softirq.Evidence()
			s.Softirq = &ev
		}
		if ps.Locks != nil {
			ev := ps.Locks.Evidence()
			s.Locks = &ev
		}
		if ps.Profile != nil {
			res := ps.Profile.result(ctx, run)
			s.Profile = &res
		}
	}
	if ps.Pauses != nil {
		ev := ps.Pauses.Evidence()
		s.JVMPauses = &ev
	}
	if ps.OffCPU != nil {
		s.OffCPU = ps.OffCPU.Evidence()
	}
	s.Timeline = ps.timeline(&s, run)
	return s
}
