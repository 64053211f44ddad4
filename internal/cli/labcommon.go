package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report"
)

// labFlags are the flags of a network lab (lab udp, lab tcp).
type labFlags struct {
	Scenarios []string
	Keep      bool
	Duration  time.Duration
	report    reportFlags
}

// register adds them to f for lab name, whose --keep keeps what kept
// says.
func (l *labFlags) register(f *pflag.FlagSet, name, kept string) {
	f.StringSliceVar(&l.Scenarios, "scenario", nil, "run only these scenarios (comma-separated; default all)")
	f.BoolVar(&l.Keep, "keep", false, "keep each scenario's namespaces and JSON reports ("+kept+")")
	f.DurationVarP(&l.Duration, "duration", "d", 3*time.Second, "each perfscope "+strings.TrimPrefix(name, "lab ")+" measurement")
	l.report.register(f, name, "text", false, false)
}

func (l *labFlags) check() error {
	if err := l.report.check(); err != nil {
		return err
	}
	if l.Duration < time.Second || l.Duration > time.Minute {
		return usageError("--duration must be between 1s and 1m, got %v", l.Duration)
	}
	return nil
}

// labRun is one network lab's run (lab udp, lab tcp) for runLab.
type labRun struct {
	// name is the command, flags its flags.
	name  string
	flags *labFlags
	// missing are the tools the scenarios need that are not installed,
	// and their packages.
	missing func() (tools, packages []string)
	// run measures the scenarios, printing each as it ends; it returns
	// the report's data and where an interrupt stopped it.
	run func(bin, dir string) (labScenarios, *netlab.Interrupted, error)
}

// labScenarios is a network lab's report data: the scenarios that
// finished, those that did not prove their fix, and what --keep kept.
type labScenarios interface {
	Finished() int
	Failed() int
	WriteKept(w io.Writer, dir string)
}

// runLab runs a network lab: root and the tools first (exit 3 naming
// what is missing), then its workspace and scenarios, the report, and the
// exit: 130 when interrupted — an interrupted lab has not proved the
// fixes it did not get to, so it never exits 0 — and 1 when a scenario
// did not prove its fix.
func runLab(ctx context.Context, g *Globals, l labRun) error {
	if err := netlab.Privileged(l.name); err != nil {
		return unavailableError("%v", err)
	}
	if missing, pkgs := l.missing(); len(missing) > 0 {
		return unavailableError("%s needs %s: apt-get install %s", l.name, strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	bin, dir, done, err := netlab.Workspace(l.name, l.flags.Keep, g.Err)
	if err != nil {
		return err
	}
	defer done()
	started := time.Now()
	data, stop, err := l.run(bin, dir)
	if err != nil {
		return err
	}
	finished := data.Finished()
	var interrupted error
	if stop != nil {
		interrupted = &ExitError{Code: ExitInterrupted, Err: errors.New(stop.Sentence(l.name, finished))}
		if finished == 0 {
			return interrupted
		}
	}
	r := report.New(l.name, Version(), started)
	r.Meta.DurationNs = int64(time.Since(started))
	r.Data = data
	if err := report.Render(g.Out, r, l.flags.report.format); err != nil {
		return err
	}
	if l.flags.report.format == report.Text && l.flags.Keep {
		data.WriteKept(g.Out, dir)
	}
	if interrupted != nil {
		return interrupted
	}
	if failed := data.Failed(); failed > 0 {
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("%d of %d scenarios did not prove their fix", failed, finished)}
	}
	return nil
}
