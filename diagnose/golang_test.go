package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// busyGo is the lab service in plain mode at scale: 4 buffers of 4 KiB per
// request, 16 KiB of 18 KiB, at 1000 requests/s.
func busyGo() evidence.Go {
	return evidence.Go{
		WindowNs:             int64(10 * time.Second),
		Requests:             evidence.Int(10000),
		RequestsSource:       "load",
		BytesPerRequest:      evidence.Float(180 << 10),
		BytesPerRequestError: evidence.Float(2 << 10),
		AllocBytes:           evidence.Float(10000 * 180 << 10),
		Sampling:             evidence.GoSampling{MemProfileRate: 512 << 10, RateSource: "memory"},
		GCCycles:             150,
		GCCyclesPerMinute:    900,
		BytesPerGCCycle:      evidence.Float(12 << 20),
		GC:                   evidence.GoGCSettings{GOGC: evidence.Int(100), GOGCSource: "default"},
		Sites: []evidence.GoAllocSite{
			{Function: "main.work", File: "/src/goapp/main.go", Line: 55, Size: 4096, Bytes: 10000 * 40 * 4096, Objects: 400000, Share: 0.89,
				BytesPerRequest: evidence.Float(160 << 10), ObjectsPerRequest: evidence.Float(40)},
			{Function: "net/http.(*conn).readRequest", Size: 1024, Bytes: 10000 * 2048, Share: 0.01,
				BytesPerRequest: evidence.Float(2048), ObjectsPerRequest: evidence.Float(2)},
		},
		Pools: []evidence.GoPool{{Address: "0x1234", Name: "main.pool", Gets: 30000, Puts: 0, News: 30000, HitRate: evidence.Float(0)}},
	}
}

// quietGo allocates 8 KB per request in small objects, collects every 10 s
// and pools well.
func quietGo() evidence.Go {
	return evidence.Go{
		WindowNs:          int64(10 * time.Second),
		Requests:          evidence.Int(500),
		BytesPerRequest:   evidence.Float(8 << 10),
		AllocBytes:        evidence.Float(500 * 8 << 10),
		Sampling:          evidence.GoSampling{MemProfileRate: 512 << 10, RateSource: "memory"},
		GCCycles:          1,
		GCCyclesPerMinute: 6,
		Sites: []evidence.GoAllocSite{
			{Function: "main.handler", Size: 48, Bytes: 500 * 4096, Share: 0.5, BytesPerRequest: evidence.Float(4096), ObjectsPerRequest: evidence.Float(85)},
			{Function: "main.init.func1", Size: 8192, Bytes: 8192 * 3, Share: 0.01, InPoolNew: true, BytesPerRequest: evidence.Float(49), ObjectsPerRequest: evidence.Float(0.006)},
		},
		Pools: []evidence.GoPool{{Address: "0x1234", Name: "main.pool", Gets: 1500, Puts: 1500, News: 3, HitRate: evidence.Float(0.998)}},
	}
}

func TestGoRules(t *testing.T) {
	off := quietGo()
	off.AllocBytes, off.BytesPerRequest = nil, nil
	off.Sampling = evidence.GoSampling{MemProfileRate: 0, RateSource: "linker", RateNote: "the linker turned sampling off"}
	for _, tc := range []struct {
		rule     string
		e        evidence.Go
		fires    bool
		severity Severity
		mention  string
	}{
		{"go.sampling-off", off, true, Info, "linker turned sampling off"},
		{"go.sampling-off", busyGo(), false, 0, ""},
		{"go.alloc-per-request", busyGo(), true, Warn, "main.work (goapp/main.go:55): 160.0 KB per request in 40.0 objects of 4096 B"},
		{"go.alloc-per-request", quietGo(), false, 0, ""},
		{"go.gc-frequency", busyGo(), true, Crit, "900 per minute"},
		{"go.gc-frequency", quietGo(), false, 0, ""},
		{"go.sync-pool-candidate", busyGo(), true, Info, "40.0 objects, 160.0 KB per request, 89%"},
		// Small objects and a pool's own New are not candidates.
		{"go.sync-pool-candidate", quietGo(), false, 0, ""},
		{"go.sync-pool-ineffective", busyGo(), true, Warn, "main.pool: 30000 Gets, 0 Puts"},
		{"go.sync-pool-ineffective", quietGo(), false, 0, ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var rule *Rule[evidence.Go]
			for i := range GoRules {
				if GoRules[i].ID == tc.rule {
					rule = &GoRules[i]
				}
			}
			if rule == nil {
				t.Fatalf("no rule %s", tc.rule)
			}
			f := rule.check(tc.e, nil)
			if (f != nil) != tc.fires {
				t.Fatalf("fired = %v, want %v: %+v", f != nil, tc.fires, f)
			}
			if f == nil {
				return
			}
			if f.Severity != tc.severity {
				t.Errorf("severity %v, want %v", f.Severity, tc.severity)
			}
			all := f.Title + "\n" + strings.Join(f.Evidence, "\n")
			if !strings.Contains(all, tc.mention) {
				t.Errorf("finding does not mention %q:\n%s", tc.mention, all)
			}
			if f.Recommendation.Why == "" || f.Recommendation.Expected == "" {
				t.Errorf("incomplete recommendation %+v", f.Recommendation)
			}
		})
	}
}

// The pool advice quotes what the benchmark it rests on measured, and a
// code sketch sized to the site.
func TestGoPoolCandidateSketch(t *testing.T) {
	f := Run(GoRules, busyGo())
	for _, x := range f {
		if x.ID != "go.sync-pool-candidate" {
			continue
		}
		r := x.Recommendation
		if !strings.Contains(r.Reference, "23 GC cycles without a pool") || len(r.Code) != 1 || !strings.Contains(r.Code[0].Code, "make([]byte, 4096)") {
			t.Errorf("recommendation %+v", r)
		}
		return
	}
	t.Fatal("no sync.Pool candidate")
}
