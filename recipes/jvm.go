package recipes

import (
	"context"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/jvm"
)

// JVMResult is one JVM measurement and its findings.
type JVMResult struct {
	*jvm.Result
	Findings []diagnose.Finding
}

// RunJVM measures a running JVM over one window: a thin wrapper over
// jvm.Measure, which already has the runner's shape (typed options,
// injectable hsperfdata root, evidence out), adding the JVM rules. The
// JVM is found through src.JVMs unless o.FS names a root.
func RunJVM(ctx context.Context, src Sources, o jvm.Options) (JVMResult, error) {
	if o.FS.Root == "" {
		o.FS = src.JVMs
	}
	res, err := jvm.Measure(ctx, o)
	if res == nil {
		return JVMResult{}, err
	}
	// A JVM that exited mid-run still leaves what was measured until then
	// (err is jvm.ErrTargetExited): judge that and hand both back.
	return JVMResult{Result: res, Findings: diagnose.Run(diagnose.JVMRules, res.Evidence)}, err
}
