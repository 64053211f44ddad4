package diagnose

import (
	"math"
	"time"
)

// the allocation → young-GC model: young collections happen when Eden fills, so their
// frequency is the allocation rate over the Eden size, and the allocation
// rate is bytes per request × requests per second. Both `perfscope gclog`
// and `perfscope jvm` predict with these functions so the two agree.

// AllocRate is the heap allocation rate in bytes/s for a request rate.
func AllocRate(bytesPerRequest, rps float64) float64 {
	return bytesPerRequest * rps
}

// YoungGCsPerMinute predicts young collections per minute when allocRate
// bytes/s fill an Eden of edenBytes. It ignores survivors, which only make
// collections more frequent, so it is a lower bound. Zero when Eden is
// unknown.
func YoungGCsPerMinute(allocRate, edenBytes float64) float64 {
	if edenBytes <= 0 || allocRate <= 0 {
		return 0
	}
	return allocRate * 60 / edenBytes
}

// EdenForInterval is the Eden size that, at allocRate bytes/s, gives one
// young collection per interval.
func EdenForInterval(allocRate float64, interval time.Duration) float64 {
	if allocRate <= 0 || interval <= 0 {
		return 0
	}
	return allocRate * interval.Seconds()
}

// RoundUpToRegion rounds bytes up to a whole number of G1 regions: G1 sizes
// Eden in regions, so a recommendation finer than a region is fiction.
func RoundUpToRegion(bytes, region float64) float64 {
	if region <= 0 {
		return bytes
	}
	return math.Ceil(bytes/region) * region
}
