package diagnose

import (
	"math"
	"testing"
	"time"
)

// Allocation per request (a Spring Boot measurement): 0.5 MB per request × 500 rps = 15 GB/min; with a 5 GB Eden that
// is 3 young GCs per minute.
func TestAllocationToYoungGCArithmetic(t *testing.T) {
	const mb = 1000 * 1000
	rate := AllocRate(0.5*mb, 500)
	if rate*60 != 15e9 {
		t.Fatalf("alloc per minute = %v, want 15e9", rate*60)
	}
	if got := YoungGCsPerMinute(rate, 5e9); math.Abs(got-3) > 1e-9 {
		t.Errorf("young GCs/min = %v, want 3", got)
	}
	if got := EdenForInterval(rate, time.Minute); got != 15e9 {
		t.Errorf("eden for 1/min = %v", got)
	}
	if YoungGCsPerMinute(rate, 0) != 0 {
		t.Error("unknown eden must give 0")
	}
	if got := RoundUpToRegion(5*mb+1, 4*mb); got != 8*mb {
		t.Errorf("round to region = %v", got)
	}
}
