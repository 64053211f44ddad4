package offcpu

import (
	"strings"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// SampleType is the pprof sample type of an off-CPU profile.
const SampleType = "off-cpu"

// Flame is the off-CPU profile of a run as a flame graph: each stack's
// microseconds off CPU, rooted at the thread's name. Every format flame
// writes takes it: folded stacks keep microseconds (bcc's offcputime -f),
// pprof writes off-cpu/nanoseconds.
func Flame(ev evidence.OffCPU) *flame.Profile {
	p := flame.New(flame.Microseconds)
	p.SampleType = SampleType
	for _, f := range ev.Folded {
		p.Add(strings.Split(f.Stack, ";"), f.Us)
	}
	return p
}
