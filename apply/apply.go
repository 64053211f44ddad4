// Package apply carries out `perfscope udp --apply ID...` and
// `--revert FILE`. A finding's fix is a list of typed changes
// (diagnose.Change); perfscope executes them itself — /proc/sys and sysfs
// writes, ethtool ioctls, nftables netlink, delete_module/finit_module,
// sched_setaffinity, audit netlink, an atomic edit of irqbalance's file —
// and reads every value back. Nothing runs through a shell: a value read
// from the system (an interface or table name) is data, never code.
//
// Apply reads every target first and refuses the whole plan if any change
// could not be undone; it writes the revert file (perfscope's own
// versioned JSON, fsynced, mode 0600) before the first change; then it
// makes the changes in order. Revert validates a revert file completely
// before touching anything and restores what perfscope changed.
package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/report"
)

var quoteWord = shellquote.Quote

// ErrNotApplicable is returned by NewPlan when an ID names no applicable
// setting recommendation of the run; the CLI maps it to a usage error.
var ErrNotApplicable = errors.New("not an applicable setting")

// ErrInterrupted: the context ended before the first change; nothing
// changed and no revert file was written.
var ErrInterrupted = errors.New("interrupted before anything was changed; no revert file was written")

// Step is one finding's changes.
type Step struct {
	FindingID string            `json:"finding_id"`
	Title     string            `json:"title"`
	Changes   []diagnose.Change `json:"changes"`
}

// Plan is the chosen changes, in the order the user named the findings.
type Plan struct {
	Steps []Step `json:"steps"`
}

// IDs lists the plan's finding IDs.
func (p Plan) IDs() []string {
	ids := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[i] = s.FindingID
	}
	return ids
}

// NewPlan selects the typed changes of findings named by ids. An unknown
// ID, or one whose recommendation is code, advice or a setting without
// typed changes, is an error that lists the IDs --apply accepts.
func NewPlan(findings []diagnose.Finding, ids []string) (Plan, error) {
	var valid []string
	byID := map[string]diagnose.Finding{}
	for _, f := range findings {
		byID[f.ID] = f
		if f.Recommendation.Applicable() {
			valid = append(valid, f.ID)
		}
	}
	slices.Sort(valid)
	validText := "none"
	if len(valid) > 0 {
		validText = strings.Join(valid, ", ")
	}
	if len(ids) == 0 {
		return Plan{}, fmt.Errorf("--apply needs at least one finding ID (%w; this run's applicable IDs: %s)", ErrNotApplicable, validText)
	}
	var p Plan
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		f, ok := byID[id]
		r := f.Recommendation
		switch {
		case !ok:
			return Plan{}, fmt.Errorf("%q is not a finding of this run (%w; applicable IDs: %s)", id, ErrNotApplicable, validText)
		case r.Kind != diagnose.KindSetting:
			what := "a code change"
			if r.Kind != diagnose.KindCode {
				what = "advice for a human decision"
			}
			return Plan{}, fmt.Errorf("%q recommends %s, which perfscope never applies (%w; applicable IDs: %s)", id, what, ErrNotApplicable, validText)
		case !r.Applicable():
			return Plan{}, fmt.Errorf("%q has no changes perfscope can make and undo in this run (%w; applicable IDs: %s)", id, ErrNotApplicable, validText)
		}
		for _, c := range r.Changes {
			if err := c.Validate(); err != nil {
				return Plan{}, fmt.Errorf("%q: %w", id, err)
			}
		}
		p.Steps = append(p.Steps, Step{FindingID: f.ID, Title: f.Title, Changes: slices.Clone(r.Changes)})
	}
	return p, nil
}

// Done is one change made, skipped or found in conflict.
type Done struct {
	FindingID string          `json:"finding_id"`
	Change    diagnose.Change `json:"change"`
	// Command is the change as a shell command, for humans.
	Command string `json:"command"`
	// Note says why a change was skipped, or what differed from the run.
	Note string `json:"note,omitempty"`
}

// ApplyOptions say where the revert file goes and what run produced the
// plan.
type ApplyOptions struct {
	Dir    string
	Run    RunInfo
	System *System
	// Identity is the host and network namespace; zero means this
	// process's.
	Identity Identity
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// RevertFile is the path of the revert file ("" when nothing was to
	// change, or the apply was refused before it).
	RevertFile string `json:"revert_file,omitempty"`
	Applied    []Done `json:"applied"`
	// Unchanged were already at the value the fix sets.
	Unchanged []Done `json:"unchanged,omitempty"`
}

// ChangeError says which change failed and what was changed before it.
type ChangeError struct {
	FindingID string
	Change    diagnose.Change
	Err       error
	// Done counts the changes made before this one.
	Done int
	// RevertFile undoes them (Apply) or is the file being reverted.
	RevertFile string
	revert     bool
}

func (e *ChangeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.Change.Command(target(e)))
	if e.FindingID != "" {
		fmt.Fprintf(&b, " (finding %s)", e.FindingID)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	switch {
	case e.revert:
		fmt.Fprintf(&b, "; %d change(s) were restored before it; fix the cause and run perfscope udp --revert %s again", e.Done, quoteWord(e.RevertFile))
	case e.Done == 0:
		fmt.Fprintf(&b, "; nothing was changed (revert file: %s)", e.RevertFile)
	default:
		fmt.Fprintf(&b, "; %d change(s) were made before it: undo them with perfscope udp --revert %s", e.Done, quoteWord(e.RevertFile))
	}
	return b.String()
}

func target(e *ChangeError) string {
	if e.revert {
		return e.Change.Old
	}
	return e.Change.New
}

func (e *ChangeError) Unwrap() error { return e.Err }

// RefusedError: Apply read the targets and will not make the plan; nothing
// was changed and no revert file was written.
type RefusedError struct {
	FindingID string
	Change    diagnose.Change
	Err       error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s (finding %s) is refused: %v; nothing was changed", e.Change.Command(e.Change.New), e.FindingID, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Apply makes the plan's changes: it reads every target (refusing the
// whole plan when a change could not be undone), writes the revert file
// with the values found, then makes each change and reads it back. It
// stops at the first failure with a *ChangeError that names the revert
// file.
func Apply(ctx context.Context, p Plan, o ApplyOptions) (ApplyResult, error) {
	var res ApplyResult
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	sys := o.System
	type planned struct {
		entry Entry
		h     handler
	}
	var todo []planned
	for _, step := range p.Steps {
		for _, c := range step.Changes {
			refuse := func(err error) error { return &RefusedError{FindingID: step.FindingID, Change: c, Err: err} }
			if err := c.Validate(); err != nil {
				return res, refuse(err)
			}
			h, err := sys.handler(c.Kind)
			if err != nil {
				return res, refuse(err)
			}
			st, err := h.read(sys, c)
			if err != nil {
				return res, refuse(err)
			}
			if st.gone {
				why := "its target no longer exists"
				if st.goneWhy != "" {
					why = st.goneWhy
				}
				return res, refuse(errors.New(why))
			}
			if h.same(c, c.New, nil, st) {
				res.Unchanged = append(res.Unchanged, Done{FindingID: step.FindingID, Change: c, Command: c.Command(c.New), Note: "already set"})
				continue
			}
			if err := h.guard(sys, c, st); err != nil {
				return res, refuse(err)
			}
			e := Entry{FindingID: step.FindingID, Change: c, Saved: st.saved}
			if !h.same(c, c.Old, nil, st) {
				// The revert restores what is there now, not what the run
				// saw.
				e.RunOld = c.Old
			}
			e.Change.Old = st.value
			todo = append(todo, planned{entry: e, h: h})
		}
	}
	if len(todo) == 0 {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, ErrInterrupted
	}
	id := o.Identity
	if id == (Identity{}) {
		var err error
		if id, err = CurrentIdentity(); err != nil {
			return res, fmt.Errorf("--apply: %w; nothing was changed", err)
		}
	}
	rf := RevertFile{Run: o.Run, Identity: id}
	for _, t := range todo {
		rf.Changes = append(rf.Changes, t.entry)
	}
	path, err := WriteRevertFile(o.Dir, &rf)
	if err != nil {
		return res, fmt.Errorf("write the revert file first: %w; nothing was changed", err)
	}
	res.RevertFile = path
	for i, t := range todo {
		c := t.entry.Change
		fail := func(err error) error {
			return &ChangeError{FindingID: t.entry.FindingID, Change: c, Err: err, Done: i, RevertFile: path}
		}
		if err := ctx.Err(); err != nil {
			return res, fail(fmt.Errorf("not made: %w", err))
		}
		if err := t.h.write(sys, c, c.New, t.entry.Saved); err != nil {
			return res, fail(err)
		}
		st, err := t.h.read(sys, c)
		if err != nil {
			return res, fail(fmt.Errorf("read back: %w", err))
		}
		if !t.h.same(c, c.New, nil, st) {
			return res, fail(fmt.Errorf("read back %s, not %s: the kernel kept or changed the value (is it read-only here, e.g. in a network namespace?)", quoteWord(st.value), quoteWord(c.New)))
		}
		d := Done{FindingID: t.entry.FindingID, Change: c, Command: c.Command(c.New)}
		if t.entry.RunOld != "" {
			d.Note = fmt.Sprintf("was %s at --apply (the run read %s); the revert restores %s", quoteWord(c.Old), quoteWord(t.entry.RunOld), quoteWord(c.Old))
		}
		res.Applied = append(res.Applied, d)
	}
	return res, nil
}

// RevertResult is what Revert did.
type RevertResult struct {
	Restored []Done `json:"restored"`
	// AlreadyOld were at their old value (never applied, or reverted).
	AlreadyOld []Done `json:"already_old,omitempty"`
	// Gone no longer exist (a thread that ended).
	Gone []Done `json:"gone,omitempty"`
	// Conflicts hold neither the old nor the new value: someone changed
	// them after --apply, and perfscope left them alone.
	Conflicts []Done `json:"conflicts,omitempty"`
}

// ErrConflicts: some targets were changed by someone else after --apply;
// they were left as found and everything else was restored.
var ErrConflicts = errors.New("changed by someone else since --apply; left as found")

// Revert restores the old values of a revert file: it reads and validates
// the whole file (a *FileError for anything perfscope did not write, on
// another host or network namespace), reads every target, then restores,
// last change first, each target that still holds the value perfscope
// set, reading it back. Targets at their old value are skipped, so a
// partially applied plan reverts cleanly; targets someone else changed are
// left alone and reported (ErrConflicts).
func Revert(ctx context.Context, path string, sys *System, id Identity) (RevertResult, error) {
	var res RevertResult
	rf, err := ReadRevertFile(path)
	if err != nil {
		return res, err
	}
	if id == (Identity{}) {
		if id, err = CurrentIdentity(); err != nil {
			return res, err
		}
	}
	if err := rf.Identity.Matches(id); err != nil {
		return res, &FileError{Path: path, Err: err}
	}
	type planned struct {
		entry Entry
		h     handler
	}
	var todo []planned
	for i := len(rf.Changes) - 1; i >= 0; i-- {
		e := rf.Changes[i]
		c := e.Change
		h, err := sys.handler(c.Kind)
		if err != nil {
			return res, err
		}
		st, err := h.read(sys, c)
		if err != nil {
			return res, fmt.Errorf("read %s before restoring it: %w; nothing was changed", describe(c), err)
		}
		d := Done{FindingID: e.FindingID, Change: c, Command: revertCommand(e)}
		switch {
		case st.gone || replaced(e.Saved, st):
			d.Note = "no longer exists"
			if st.goneWhy != "" {
				d.Note = st.goneWhy
			}
			res.Gone = append(res.Gone, d)
		case h.same(c, c.Old, e.Saved, st):
			d.Note = "already at its old value"
			res.AlreadyOld = append(res.AlreadyOld, d)
		case h.same(c, c.New, e.Saved, st):
			todo = append(todo, planned{entry: e, h: h})
		default:
			d.Note = fmt.Sprintf("now %s, neither the %s found nor the %s set by --apply", quoteWord(st.value), quoteWord(c.Old), quoteWord(c.New))
			res.Conflicts = append(res.Conflicts, d)
		}
	}
	for i, t := range todo {
		c := t.entry.Change
		fail := func(err error) error {
			return &ChangeError{FindingID: t.entry.FindingID, Change: c, Err: err, Done: i, RevertFile: path, revert: true}
		}
		if err := ctx.Err(); err != nil {
			return res, fail(fmt.Errorf("not restored: %w", err))
		}
		if err := t.h.write(sys, c, c.Old, t.entry.Saved); err != nil {
			return res, fail(err)
		}
		st, err := t.h.read(sys, c)
		if err != nil {
			return res, fail(fmt.Errorf("read back: %w", err))
		}
		if !t.h.same(c, c.Old, t.entry.Saved, st) {
			return res, fail(fmt.Errorf("read back %s, not %s", quoteWord(st.value), quoteWord(c.Old)))
		}
		res.Restored = append(res.Restored, Done{FindingID: t.entry.FindingID, Change: c, Command: revertCommand(t.entry)})
	}
	if len(res.Conflicts) > 0 {
		names := make([]string, len(res.Conflicts))
		for i, d := range res.Conflicts {
			names[i] = describe(d.Change) + " " + d.Note
		}
		return res, fmt.Errorf("%d change(s) %w: %s", len(res.Conflicts), ErrConflicts, strings.Join(names, "; "))
	}
	return res, nil
}

// replaced: the thread --apply changed ended and another reuses its TID.
func replaced(saved *Saved, st state) bool {
	return saved != nil && saved.Thread != nil && st.saved != nil && st.saved.Thread != nil && *saved.Thread != *st.saved.Thread
}

// describe names a change's target in a few words, quoted.
func describe(c diagnose.Change) string {
	switch c.Kind {
	case diagnose.ChangeSysctl:
		return "sysctl " + quoteWord(c.Key)
	case diagnose.ChangeSysfs, diagnose.ChangeIrqbalanceBan:
		return quoteWord(c.Path)
	case diagnose.ChangeEthtoolFeature:
		return fmt.Sprintf("feature %s of %s", c.Feature, quoteWord(c.Iface))
	case diagnose.ChangeEthtoolRing, diagnose.ChangeEthtoolCoalesce, diagnose.ChangeEthtoolChannels, diagnose.ChangeEthtoolRSS:
		return fmt.Sprintf("%s of %s", c.Kind, quoteWord(c.Iface))
	case diagnose.ChangeNftTable:
		return fmt.Sprintf("nft table %s %s", c.Family, quoteWord(c.Table))
	case diagnose.ChangeIptablesTable, diagnose.ChangeModule:
		return "module " + c.Module
	case diagnose.ChangeThreadAffinity:
		return fmt.Sprintf("affinity of thread %d", c.TID)
	case diagnose.ChangeAudit:
		return "audit enabled"
	case diagnose.ChangeNAPI:
		return fmt.Sprintf("NAPI instance %d of %s", c.NAPIID, quoteWord(c.Iface))
	}
	return string(c.Kind)
}

// changeLines are done's changes as lines of report.WriteChangeLog.
func changeLines(verb string, done []Done) []report.ChangeLine {
	lines := make([]report.ChangeLine, 0, len(done))
	for _, d := range done {
		lines = append(lines, report.ChangeLine{Verb: verb, FindingID: d.FindingID, Command: d.Command, Note: d.Note})
	}
	return lines
}

// Log is what Apply did, a line per change (report.WriteChangeLog).
func (r ApplyResult) Log() []report.ChangeLine {
	return append(changeLines("unchanged", r.Unchanged), changeLines("applied", r.Applied)...)
}

// Log is what Revert did, a line per change (report.WriteChangeLog).
func (r RevertResult) Log() []report.ChangeLine {
	var lines []report.ChangeLine
	for _, v := range []struct {
		verb string
		done []Done
	}{{"reverted", r.Restored}, {"already old", r.AlreadyOld}, {"gone", r.Gone}, {"left as found", r.Conflicts}} {
		lines = append(lines, changeLines(v.verb, v.done)...)
	}
	return lines
}
