package jvm

import (
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
)

// Prediction is the allocation → young-GC model at one request rate.
type Prediction struct {
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

// Predict applies the model at --target-rps, else at the observed rate,
// else at the load's saturation rate (labelled as such). The zero
// Prediction means no rate or no bytes per request is known.
func Predict(e evidence.JVM) Prediction {
	p := Prediction{RPS: e.TargetRPS, RPSSource: "target"}
	if p.RPS == 0 && e.RequestRate != nil {
		p.RPS, p.RPSSource = *e.RequestRate, "observed"
		if e.RateIsSaturation {
			p.RPSSource = "saturation"
		}
	}
	perReq, ok := e.PerRequest()
	if p.RPS == 0 || !ok || perReq == 0 {
		return Prediction{}
	}
	return predictAt(e, p.RPS, p.RPSSource, perReq)
}

// PredictObserved is the model at the window's own rate: checked against
// the young GCs the window counted, it shows how far the model is off.
func PredictObserved(e evidence.JVM) (Prediction, bool) {
	perReq, ok := e.PerRequest()
	if !ok || e.RequestRate == nil || *e.RequestRate == 0 {
		return Prediction{}, false
	}
	return predictAt(e, *e.RequestRate, "observed", perReq), true
}

func predictAt(e evidence.JVM, rps float64, source string, perReq float64) Prediction {
	p := Prediction{RPS: rps, RPSSource: source, BytesPerRequest: perReq, EdenSource: e.EdenAtCollectionSource}
	p.Eden = diagnose.EdenForPrediction(e)
	p.AllocRate = diagnose.AllocRate(perReq, rps)
	p.YoungGCsPerMinute = diagnose.YoungGCsPerMinute(p.AllocRate, p.Eden)
	interval := time.Duration(e.TargetGCIntervalNs)
	if interval <= 0 {
		interval = diagnose.DefaultTargetGCInterval
	}
	p.EdenForTarget = diagnose.RoundUpToRegion(diagnose.EdenForInterval(p.AllocRate, interval), float64(e.RegionSize))
	return p
}
