package measure

import (
	"context"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/jvm/asprof"
)

// JVMResult is one JVM measurement and its findings.
type JVMResult struct {
	*jvm.Result
	// ProfileOptions are how async-profiler ran (its event and interval).
	ProfileOptions asprof.Options
	Findings       []diagnose.Finding
}

// RunJVM measures a running JVM over one window: a thin wrapper over
// jvm.Measure, which already has the runner's shape (typed options,
// injectable hsperfdata root, evidence out), adding the JVM rules. The
// JVM is found through src.JVMs unless o.FS names a root.
func RunJVM(ctx context.Context, src Sources, o jvm.Options) (JVMResult, error) {
	if o.FS.Root == "" {
		o.FS = src.JVMs
	}
	// Read before the window: a JVM that exits in it is still named.
	w := src.workload(o.PID)
	res, err := jvm.Measure(ctx, o)
	if res == nil {
		return JVMResult{}, err
	}
	res.Evidence.Workload = w
	// A JVM that exited mid-run still leaves what was measured until then
	// (err is jvm.ErrTargetExited): judge that and hand both back.
	return JVMResult{Result: res, ProfileOptions: o.Profile, Findings: diagnose.Run(diagnose.JVMRules, res.Evidence)}, err
}

// Overhead is perfscope's cost in the JVM's window: the attach, and the
// passive request counter's BPF programs as a share of cpus CPUs' time.
func (j *JVMResult) Overhead(cpus int) *evidence.Overhead {
	ov := &evidence.Overhead{AttachMethod: "hotspot-attach+async-profiler", AttachNs: j.AttachNs, Programs: j.BPF}
	if w := j.Evidence.WindowNs; w > 0 && cpus > 0 {
		for _, p := range j.BPF {
			ov.BPFTimeShare += float64(p.RunTimeNs) / float64(w) / float64(cpus)
		}
	}
	return ov
}

// Flame is async-profiler's profile as a stack trie (nil without one),
// threads merged.
func (j *JVMResult) Flame() *flame.Profile {
	if j.Profile == nil {
		return nil
	}
	unit := flame.Bytes
	if j.Profile.Event != asprof.Alloc {
		unit = flame.Nanoseconds
	}
	fp := flame.New(unit)
	for _, s := range j.Profile.Stacks {
		// The thread frame async-profiler roots each stack at splits the
		// profile by thread pool; a flame graph merges the threads.
		fp.Add(jvm.WithoutThread(s.Frames), s.Weight)
	}
	return fp
}
