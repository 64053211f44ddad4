package measure

import (
	"github.com/perfscope/perfscope/spec"
)

// HSPerfSpec is the hsperfdata collector: a HotSpot JVM's pauses, read
// from the counters it publishes.
var HSPerfSpec = spec.Part{Name: "hsperfdata", Recipe: true, Section: spec.SectionJVMPauses,
	Doc: "a HotSpot JVM's GC and safepoint counts and times, read from its hsperfdata (nothing attached)",
	Options: []spec.Option{
		{Name: "pid", Domain: spec.Domain{Kind: spec.KindPID, Min: spec.Bound(1)}, Required: true, Doc: "the JVM"},
	},
	Needs: spec.WithAttribution(spec.NeedPtrace, spec.NeedHostPID, spec.NeedDACRead),
	Gives: []spec.Input{spec.InputPauses},
}
