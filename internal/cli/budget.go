package cli

import (
	"github.com/perfscope/perfscope/measure"
	"github.com/spf13/pflag"
)

// budgetFlags are --overhead-budget and --exact, for the commands whose
// probes the budget governs.
func budgetFlags(f *pflag.FlagSet, pct *float64, exact *bool) {
	f.Float64Var(pct, "overhead-budget", 100*measure.DefaultBudget,
		"the most of any one CPU's time perfscope may take (its BPF programs there plus its own process spread over every CPU), in percent; per-packet tracepoints are then attached in sampling windows and their counts estimated")
	f.BoolVar(exact, "exact", false, "attach every tracepoint for the whole run and count every event, whatever it costs")
}

// parseBudget checks the two flags and returns the window's budget.
func parseBudget(pct float64, exact, pctSet bool) (measure.Budget, error) {
	if exact {
		if pctSet {
			return measure.Budget{}, usageError("--exact counts every event: it takes no --overhead-budget")
		}
		return measure.Budget{}, nil
	}
	b, err := measure.BudgetOf(pct)
	if err != nil {
		return measure.Budget{}, usageError("--overhead-budget: %v (use --exact to count every event)", err)
	}
	return b, nil
}
