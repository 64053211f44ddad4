// Package netapply carries out `perfscope udp --apply ID...` and
// `--revert FILE`: it selects the system-setting recommendations the user
// named, writes a revert script restoring the values the run observed
// BEFORE anything changes, runs the apply commands one by one through an
// injectable runner, and later runs a revert script it recognises as its
// own. Code changes and advice are never applied: perfscope changes only
// what it can undo.
package netapply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/safeio"
)

// Marker is the second line of every revert script perfscope writes;
// Revert refuses files without it so that --revert cannot be pointed at an
// arbitrary shell script by mistake.
const Marker = "# perfscope revert script v1"

// ErrNotApplicable is returned by NewPlan when an ID names no setting
// recommendation of the run; the CLI maps it to a usage error.
var ErrNotApplicable = errors.New("not an applicable setting")

// ErrNotRevertScript is returned by Revert for a file perfscope did not
// write.
var ErrNotRevertScript = errors.New("not a perfscope revert script")

// Step is one finding's setting change.
type Step struct {
	FindingID string   `json:"finding_id"`
	Title     string   `json:"title"`
	Apply     []string `json:"apply"`
	Revert    []string `json:"revert"`
}

// Plan is the chosen setting changes, in the order the user named them.
type Plan struct {
	Steps []Step `json:"steps"`
	// RevertScript is the path WriteRevertScript wrote; Apply refuses a
	// plan without one.
	RevertScript string `json:"revert_script,omitempty"`
}

// IDs lists the plan's finding IDs.
func (p Plan) IDs() []string {
	ids := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		ids[i] = s.FindingID
	}
	return ids
}

// NewPlan selects the setting recommendations of findings named by ids.
// An unknown ID, or one whose recommendation is code or advice, is an
// error that lists the IDs --apply accepts for this run.
func NewPlan(findings []diagnose.Finding, ids []string) (Plan, error) {
	var valid []string
	byID := map[string]diagnose.Finding{}
	for _, f := range findings {
		byID[f.ID] = f
		if applicable(f) {
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
		switch {
		case !ok:
			return Plan{}, fmt.Errorf("%q is not a finding of this run (%w; applicable IDs: %s)", id, ErrNotApplicable, validText)
		case f.Recommendation.Kind != diagnose.KindSetting:
			what := "a code change"
			if f.Recommendation.Kind != diagnose.KindCode {
				what = "advice for a human decision"
			}
			return Plan{}, fmt.Errorf("%q recommends %s, which perfscope never applies (%w; applicable IDs: %s)", id, what, ErrNotApplicable, validText)
		case !applicable(f):
			return Plan{}, fmt.Errorf("%q has no apply and revert commands in this run (%w; applicable IDs: %s)", id, ErrNotApplicable, validText)
		}
		p.Steps = append(p.Steps, Step{
			FindingID: f.ID, Title: f.Title,
			Apply: slices.Clone(f.Recommendation.Apply), Revert: slices.Clone(f.Recommendation.Revert),
		})
	}
	return p, nil
}

// applicable: a setting perfscope can both apply and undo. A setting
// without revert commands (the old value was unknown) is never applied.
func applicable(f diagnose.Finding) bool {
	r := f.Recommendation
	return r.Kind == diagnose.KindSetting && len(r.Apply) > 0 && len(r.Revert) > 0
}

// Script is the revert script's text. Steps are undone in reverse order
// (the last change first), each step's revert commands in their own order.
// Revert commands restore the values the run observed, so running the
// script after a partial apply is safe: steps that never ran are set to
// the value they already have.
func Script(p Plan, host string, written time.Time) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString(Marker + "\n")
	fmt.Fprintf(&b, "# Undoes: perfscope udp --apply %s\n", strings.Join(p.IDs(), " "))
	fmt.Fprintf(&b, "# Host: %s\n", host)
	fmt.Fprintf(&b, "# Written: %s, before any change was made\n", written.UTC().Format(time.RFC3339))
	b.WriteString("# Run it with: perfscope udp --revert THIS_FILE (or sh THIS_FILE)\n")
	b.WriteString("set -e\n")
	for i := len(p.Steps) - 1; i >= 0; i-- {
		s := p.Steps[i]
		fmt.Fprintf(&b, "\n# %s: %s\n", s.FindingID, oneLine(s.Title))
		for _, c := range s.Revert {
			b.WriteString(oneLine(c) + "\n")
		}
	}
	return b.String()
}

// oneLine keeps a command or title on one line: the script is run line by
// line by Revert.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// WriteRevertScript writes the plan's revert script into dir (created if
// missing) and records its path in the plan. The file is new (never
// overwrites), executable by its owner, and synced before returning so that
// a crash during Apply still leaves it on disk.
func WriteRevertScript(dir string, p *Plan) (string, error) {
	if len(p.Steps) == 0 {
		return "", errors.New("write revert script: empty plan")
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	now := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write revert script: %w", err)
	}
	f, err := os.CreateTemp(dir, "perfscope-revert-"+now.UTC().Format("20060102T150405Z")+"-*.sh")
	if err != nil {
		return "", fmt.Errorf("write revert script: %w", err)
	}
	path := f.Name()
	werr := func() error {
		if _, err := f.WriteString(Script(*p, host, now)); err != nil {
			return err
		}
		if err := f.Chmod(0o700); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return "", fmt.Errorf("write revert script %s: %w", path, werr)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	p.RevertScript = path
	return path, nil
}

// Runner runs one shell command and returns its combined output.
type Runner interface {
	Run(ctx context.Context, command string) ([]byte, error)
}

// Shell runs commands with /bin/sh -c, as a user would paste them.
type Shell struct{}

// Run implements Runner.
func (Shell) Run(ctx context.Context, command string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	// A command that leaves a child holding the output pipe must not hang
	// perfscope after it exits or is cancelled.
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// Executed is one command that ran successfully.
type Executed struct {
	FindingID string `json:"finding_id"`
	Command   string `json:"command"`
	Output    string `json:"output,omitempty"`
}

// CommandError says which command failed, what it printed, and how to undo
// the commands that ran before it.
type CommandError struct {
	FindingID string
	Command   string
	Output    string
	Err       error
	// Ran counts the commands that succeeded before this one.
	Ran int
	// Script undoes them (Apply) or is the script being run (Revert).
	Script string
	revert bool
}

func (e *CommandError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q failed", e.Command)
	if e.FindingID != "" {
		fmt.Fprintf(&b, " (finding %s)", e.FindingID)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if out := lastLine(e.Output); out != "" {
		fmt.Fprintf(&b, ": %s", out)
	}
	switch {
	case e.revert:
		fmt.Fprintf(&b, "; %d revert command(s) ran before it, fix the cause and run %s again", e.Ran, e.Script)
	case e.Ran == 0:
		fmt.Fprintf(&b, "; nothing was changed (revert script: %s)", e.Script)
	default:
		fmt.Fprintf(&b, "; %d command(s) ran before it: undo them with perfscope udp --revert %s", e.Ran, e.Script)
	}
	return b.String()
}

func (e *CommandError) Unwrap() error { return e.Err }

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Apply runs the plan's apply commands in order and stops at the first
// failure (or cancellation) with a *CommandError. It refuses a plan whose
// revert script was not written first.
func Apply(ctx context.Context, p Plan, r Runner) ([]Executed, error) {
	if p.RevertScript == "" {
		return nil, errors.New("apply: the revert script must be written before anything is changed")
	}
	var done []Executed
	for _, s := range p.Steps {
		for _, c := range s.Apply {
			if err := ctx.Err(); err != nil {
				return done, &CommandError{FindingID: s.FindingID, Command: c, Err: fmt.Errorf("not run: %w", err), Ran: len(done), Script: p.RevertScript}
			}
			out, err := r.Run(ctx, c)
			if err == nil {
				err = checkSysctl(ctx, r, c)
			}
			if err != nil {
				return done, &CommandError{FindingID: s.FindingID, Command: c, Output: string(out), Err: err, Ran: len(done), Script: p.RevertScript}
			}
			done = append(done, Executed{FindingID: s.FindingID, Command: c, Output: strings.TrimSpace(string(out))})
		}
	}
	return done, nil
}

// RevertCommands reads a revert script written by WriteRevertScript and
// returns its commands in order. It fails with ErrNotRevertScript for any
// other file.
func RevertCommands(script []byte) ([]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(script))
	var cmds []string
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case line == 1 && text != "#!/bin/sh", line == 2 && text != Marker:
			return nil, ErrNotRevertScript
		case text == "" || strings.HasPrefix(text, "#") || text == "set -e":
			continue
		}
		cmds = append(cmds, text)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if line < 2 {
		return nil, ErrNotRevertScript
	}
	return cmds, nil
}

// Revert runs the revert script at path command by command, stopping at
// the first failure as `set -e` would, so that the error names the command.
func Revert(ctx context.Context, path string, r Runner) ([]Executed, error) {
	script, err := readRevertScript(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("revert: %w", err)
	}
	cmds, err := RevertCommands(script)
	if err != nil {
		return nil, fmt.Errorf("revert %s: %w (its second line must be %q)", path, err, Marker)
	}
	var done []Executed
	for _, c := range cmds {
		if err := ctx.Err(); err != nil {
			return done, &CommandError{Command: c, Err: fmt.Errorf("not run: %w", err), Ran: len(done), Script: path, revert: true}
		}
		out, err := r.Run(ctx, c)
		if err == nil {
			err = checkSysctl(ctx, r, c)
		}
		if err != nil {
			return done, &CommandError{Command: c, Output: string(out), Err: err, Ran: len(done), Script: path, revert: true}
		}
		done = append(done, Executed{Command: c, Output: strings.TrimSpace(string(out))})
	}
	return done, nil
}

// MaxRevertScriptBytes caps a revert script: the scripts --apply writes
// are a few hundred bytes per finding.
const MaxRevertScriptBytes = 256 << 10

// readRevertScript reads the header first, so a FIFO, /dev/zero or a
// large file that is not a revert script is refused after a few bytes;
// the rest is read up to MaxRevertScriptBytes.
func readRevertScript(ctx context.Context, path string) ([]byte, error) {
	in, err := safeio.OpenInput(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	br := bufio.NewReader(safeio.LimitReader(in, MaxRevertScriptBytes, path))
	want := "#!/bin/sh\n" + Marker + "\n"
	head := make([]byte, len(want))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != want {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: %w (its first lines must be \"#!/bin/sh\" and %q)", path, ErrNotRevertScript, Marker)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		return nil, err
	}
	return append(head, rest...), nil
}

// sysctlWrite parses "sysctl -w KEY=VALUE" (any flags containing w).
func sysctlWrite(command string) (key, value string, ok bool) {
	f := strings.Fields(command)
	if len(f) != 3 || f[0] != "sysctl" || !strings.HasPrefix(f[1], "-") || !strings.Contains(f[1], "w") {
		return "", "", false
	}
	return strings.Cut(f[2], "=")
}

// checkSysctl reads back what a sysctl write set. procps sysctl exits 0
// when the kernel refuses a write with EINVAL, which is what a read-only
// per-namespace copy does (net.core.rmem_default outside the initial
// network namespace): without the read-back, --apply would report a change
// that never happened.
func checkSysctl(ctx context.Context, r Runner, command string) error {
	key, want, ok := sysctlWrite(command)
	if !ok {
		return nil
	}
	out, err := r.Run(ctx, "sysctl -n "+key)
	if err != nil {
		return fmt.Errorf("read %s back: %w", key, err)
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != strings.Join(strings.Fields(want), " ") {
		return fmt.Errorf("the kernel kept %s = %s (sysctl exits 0 when a write is refused; is the key read-only here, e.g. in a network namespace?)", key, got)
	}
	return nil
}
