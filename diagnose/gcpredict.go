package diagnose

import (
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// YoungGCPrediction is the allocation → young-GC model (gcmodel.go) at one
// request rate, as `perfscope jvm` reports it.
type YoungGCPrediction struct {
	RPS float64 `json:"rps"`
	// RPSSource: "target" (--target-rps), "observed" (the window's
	// counted rate), or "saturation" (the rate perfscope's closed-loop
	// load reached: a capacity, shown but not planned at).
	RPSSource string `json:"rps_source,omitempty"`
	// BytesPerRequest is the process-wide figure (what the GC sees), not
	// the request threads' alone.
	BytesPerRequest   float64 `json:"bytes_per_request"`
	AllocRate         float64 `json:"alloc_rate"`
	Eden              float64 `json:"eden"`
	EdenSource        string  `json:"eden_source,omitempty"`
	YoungGCsPerMinute float64 `json:"young_gcs_per_minute"`
	// EdenForTarget is the Eden giving one young GC per
	// target_gc_interval, rounded up to whole G1 regions.
	EdenForTarget float64 `json:"eden_for_target"`
}

// PredictYoungGC applies the model at --target-rps, else at the observed rate,
// else at the load's saturation rate (labelled as such). The zero
// YoungGCPrediction means no rate or no bytes per request is known.
func PredictYoungGC(e evidence.JVM) YoungGCPrediction {
	p := YoungGCPrediction{RPS: e.TargetRPS, RPSSource: "target"}
	if p.RPS == 0 && e.RequestRate != nil {
		p.RPS, p.RPSSource = *e.RequestRate, "observed"
		if e.RateIsSaturation {
			p.RPSSource = "saturation"
		}
	}
	perReq, ok := e.PerRequest()
	if p.RPS == 0 || !ok || perReq == 0 {
		return YoungGCPrediction{}
	}
	return predictYoungGCAt(e, p.RPS, p.RPSSource, perReq)
}

// PredictYoungGCObserved is the model at the window's own rate: checked
// against the young GCs the window counted, it shows how far the model is off.
func PredictYoungGCObserved(e evidence.JVM) (YoungGCPrediction, bool) {
	perReq, ok := e.PerRequest()
	if !ok || e.RequestRate == nil || *e.RequestRate == 0 {
		return YoungGCPrediction{}, false
	}
	return predictYoungGCAt(e, *e.RequestRate, "observed", perReq), true
}

func predictYoungGCAt(e evidence.JVM, rps float64, source string, perReq float64) YoungGCPrediction {
	p := YoungGCPrediction{RPS: rps, RPSSource: source, BytesPerRequest: perReq, EdenSource: e.EdenAtCollectionSource}
	p.Eden = EdenForPrediction(e)
	p.AllocRate = AllocRate(perReq, rps)
	p.YoungGCsPerMinute = YoungGCsPerMinute(p.AllocRate, p.Eden)
	interval := time.Duration(e.TargetGCIntervalNs)
	if interval <= 0 {
		interval = DefaultTargetGCInterval
	}
	p.EdenForTarget = RoundUpToRegion(EdenForInterval(p.AllocRate, interval), float64(e.RegionSize))
	return p
}
