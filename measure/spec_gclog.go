package measure

import (
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/spec"
)

// GCLogSpec is the gclog collector: HotSpot GC logs, read after the fact.
var GCLogSpec = spec.Part{Name: "gclog", Recipe: true, Section: spec.SectionGC,
	Doc: "HotSpot GC log analysis (JDK 8 and unified logging): pauses, allocation and promotion rates, full-GC causes",
	Options: []spec.Option{
		{Name: "files", Domain: spec.Domain{Kind: spec.KindFiles}, Required: true, Doc: "one JVM's GC log files, oldest first (rotated siblings are read too)"},
		{Name: "pause_goal", Domain: spec.Domain{Kind: spec.KindDuration, Min: spec.Bound(float64(time.Microsecond))}, Default: diagnose.DefaultPauseGoal, Doc: "pauses longer than this are findings"},
		{Name: "young_interval", Domain: spec.Domain{Kind: spec.KindDuration, Min: spec.Bound(float64(time.Millisecond))}, Default: diagnose.DefaultTargetGCInterval, Doc: "young GCs more frequent than this are findings"},
		{Name: "rps", Domain: spec.Domain{Kind: spec.KindFloat, Min: spec.Bound(0)}, Doc: "requests per second served during the log (bytes-per-request model)"},
		{Name: "requests", Domain: spec.Domain{Kind: spec.KindFloat, Min: spec.Bound(0)}, Doc: "requests served during the log (instead of rps)"},
		{Name: "target_rps", Domain: spec.Domain{Kind: spec.KindFloat, Min: spec.Bound(0)}, Doc: "request rate to predict young GCs at"},
	},
	Needs: []spec.Need{spec.NeedDACRead,
		{Kind: spec.Mount, Name: "/logs", ReadOnly: true, Why: "the GC log files the recipe reads (mount their directory)",
			Without: "the GC log section is empty"}},
	Once:  true,
	Gives: []spec.Input{spec.InputGC},
}
