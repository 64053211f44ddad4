package cli

import (
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/report"
)

// budgetFlags are --overhead-budget and --exact, for the commands whose
// probes the budget governs.
type budgetFlags struct {
	pct   float64
	exact bool
	fs    *pflag.FlagSet
	// budget is the window's, once checked.
	budget budget.Budget
}

func (b *budgetFlags) register(f *pflag.FlagSet) {
	b.fs = f
	f.Float64Var(&b.pct, "overhead-budget", 100*budget.Default,
		"the most of any one CPU's time perfscope may take (its BPF programs there plus its own process spread over every CPU), in percent; per-packet tracepoints are then attached in sampling windows and their counts estimated")
	f.BoolVar(&b.exact, "exact", false, "attach every tracepoint for the whole run and count every event, whatever it costs")
}

// check reads the two flags into budget, and says whether either was
// given (recipe run keeps the recipe's budget otherwise).
func (b *budgetFlags) check() (given bool, err error) {
	pctSet := b.fs.Changed("overhead-budget")
	if b.exact {
		if pctSet {
			return true, usageError("--exact counts every event: it takes no --overhead-budget")
		}
		b.budget = budget.Budget{}
		return true, nil
	}
	if b.budget, err = budget.Of(b.pct); err != nil {
		return pctSet, usageError("--overhead-budget: %v (use --exact to count every event)", err)
	}
	return pctSet, nil
}

// reportFlags are -o, and where a command has them --out and --fail-on.
type reportFlags struct {
	command                string
	output, out, failOnSev string

	format report.Format
	failOn diagnose.Severity
}

// register adds -o (def its default), and --out and --fail-on when
// asked, to f for command (its formats: report.FormatUsage).
func (r *reportFlags) register(f *pflag.FlagSet, command, def string, out, failOn bool) {
	r.command = command
	f.StringVarP(&r.output, "output", "o", def, report.FormatUsage(command))
	if out {
		f.StringVar(&r.out, "out", "", "write the output to this file instead of standard output")
	}
	if failOn {
		f.StringVar(&r.failOnSev, "fail-on", "", "exit 1 when a finding is at or above this severity: info, warn or crit")
	}
}

// check reads -o and --fail-on, and refuses an --out that cannot be
// written before anything is measured (it is checked again when written).
func (r *reportFlags) check() error {
	var err error
	if r.format, err = report.ParseFormat(r.command, r.output); err != nil {
		return asUsage(err)
	}
	if r.failOnSev != "" {
		if r.failOn, err = diagnose.ParseSeverity(r.failOnSev); err != nil {
			return usageError("--fail-on: %v", err)
		}
	}
	if r.out != "" {
		if err := safeio.CheckOutput(r.out); err != nil {
			return usageError("--out: cannot write %s: %v", r.out, err)
		}
	}
	return nil
}
