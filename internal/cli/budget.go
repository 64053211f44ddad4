package cli

import (
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/measure/budget"
)

// budgetFlags are --overhead-budget and --exact, for the commands whose
// probes the budget governs.
func budgetFlags(f *pflag.FlagSet, pct *float64, exact *bool) {
	f.Float64Var(pct, "overhead-budget", 100*budget.Default,
		"the most of any one CPU's time perfscope may take (its BPF programs there plus its own process spread over every CPU), in percent; per-packet tracepoints are then attached in sampling windows and their counts estimated")
	f.BoolVar(exact, "exact", false, "attach every tracepoint for the whole run and count every event, whatever it costs")
}

// parseBudget checks the two flags and returns the window's budget.
func parseBudget(pct float64, exact, pctSet bool) (budget.Budget, error) {
	if exact {
		if pctSet {
			return budget.Budget{}, usageError("--exact counts every event: it takes no --overhead-budget")
		}
		return budget.Budget{}, nil
	}
	b, err := budget.Of(pct)
	if err != nil {
		return budget.Budget{}, usageError("--overhead-budget: %v (use --exact to count every event)", err)
	}
	return b, nil
}
