package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// busyJVM is the Spring Boot allocation study's arithmetic at small scale: 300 KB per request at
// 200 requests/s into a 64 MB Eden fills it every ~1 s.
func busyJVM() evidence.JVM {
	return evidence.JVM{
		Collector:          "GarbageFirst",
		WindowNs:           int64(10 * time.Second),
		Requests:           evidence.Int(2000),
		RequestRate:        evidence.Float(200),
		BytesPerRequest:    evidence.Float(300 << 10),
		AllocBytesEden:     2000 * 300 << 10,
		EdenCapacity:       64 << 20,
		SurvivorCapacity:   8 << 20,
		RegionSize:         1 << 20,
		TargetRPS:          200,
		TargetGCIntervalNs: int64(10 * time.Second),
		YoungGCs:           9,
		MeanYoungPauseNs:   4e6,
		GCTimeShare:        0.08,
		Promoted:           60 << 20,
		PromotedPerYoungGC: 60 << 20 / 9,
		Sites: []evidence.AllocSite{
			{Frame: "SampleApp.alloc", Type: "byte[]", Bytes: 500 << 20, Share: 0.8, BytesPerRequest: 250 << 10},
			{Frame: "logging: java.util.logging", Bytes: 100 << 20, Share: 0.16, BytesPerRequest: 50 << 10, Logging: "java.util.logging"},
		},
		Logging: evidence.LoggingCost{Bytes: 100 << 20, Share: 0.16, BytesPerRequest: 50 << 10, ByFramework: map[string]int64{"java.util.logging": 100 << 20}},
	}
}

// quietJVM allocates 8 KB per request at 50 requests/s into a 256 MB Eden.
func quietJVM() evidence.JVM {
	return evidence.JVM{
		Collector:        "Copy:MSC",
		WindowNs:         int64(10 * time.Second),
		Requests:         evidence.Int(500),
		RequestRate:      evidence.Float(50),
		BytesPerRequest:  evidence.Float(8 << 10),
		AllocBytesEden:   500 * 8 << 10,
		EdenCapacity:     256 << 20,
		SurvivorCapacity: 32 << 20,
		GCTimeShare:      0.001,
		Logging:          evidence.LoggingCost{Bytes: 1 << 10, Share: 0.01},
	}
}

func TestJVMRules(t *testing.T) {
	for _, tc := range []struct {
		rule     string
		e        evidence.JVM
		fires    bool
		severity Severity
		mention  string
	}{
		{"jvm.young-gc-frequency", busyJVM(), true, Crit, "Eden of 586 MB"},
		{"jvm.young-gc-frequency", quietJVM(), false, 0, ""},
		{"jvm.young-gc-frequency", func() evidence.JVM { e := busyJVM(); e.TargetRPS = 0; e.EdenCapacity = 0; return e }(), false, 0, ""},
		{"jvm.alloc-per-request", busyJVM(), true, Warn, "SampleApp.alloc (byte[])"},
		{"jvm.alloc-per-request", quietJVM(), false, 0, ""},
		{"jvm.logging-allocation", busyJVM(), true, Warn, "logging costs 50.0 KB per request"},
		{"jvm.logging-allocation", quietJVM(), false, 0, ""},
		{"jvm.gc-time-share", busyJVM(), true, Warn, "9 young GCs"},
		{"jvm.gc-time-share", func() evidence.JVM { e := busyJVM(); e.GCTimeShare = 0.2; return e }(), true, Crit, ""},
		{"jvm.gc-time-share", quietJVM(), false, 0, ""},
		{"jvm.premature-promotion", busyJVM(), true, Warn, "60 MB across 9 young GCs"},
		{"jvm.premature-promotion", quietJVM(), false, 0, ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var rule *Rule[evidence.JVM]
			for i := range JVMRules {
				if JVMRules[i].ID == tc.rule {
					rule = &JVMRules[i]
				}
			}
			if rule == nil {
				t.Fatalf("no rule %s", tc.rule)
			}
			f := rule.check(tc.e, nil)
			if (f != nil) != tc.fires {
				t.Fatalf("fired = %v, want %v (%+v)", f != nil, tc.fires, f)
			}
			if f == nil {
				return
			}
			if f.Severity != tc.severity {
				t.Errorf("severity %v, want %v", f.Severity, tc.severity)
			}
			if f.Impact <= 0 || f.Impact > 1 {
				t.Errorf("impact %v outside (0,1]", f.Impact)
			}
			all := f.Title + "\n" + strings.Join(f.Evidence, "\n")
			if tc.mention != "" && !strings.Contains(all, tc.mention) {
				t.Errorf("finding does not mention %q:\n%s", tc.mention, all)
			}
			if f.Recommendation.Why == "" || f.Recommendation.Expected == "" {
				t.Errorf("recommendation incomplete: %+v", f.Recommendation)
			}
		})
	}
}

// The Eden recommendation is whole G1 regions and the caveat says why.
func TestYoungGCRecommendationIsRegionGranular(t *testing.T) {
	e := busyJVM()
	e.RegionSize = 4 << 20
	f := checkYoungGCFrequency(e)
	if f == nil {
		t.Fatal("silent")
	}
	// 300 KB × 200/s × 10 s = 585.9 MB → 147 regions of 4 MB = 588 MB.
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "Eden of 588 MB") {
		t.Errorf("evidence %q", f.Evidence)
	}
	if !strings.Contains(strings.Join(f.Recommendation.Caveats, "\n"), "147 regions") || !strings.Contains(strings.Join(f.Recommendation.Caveats, "\n"), "MaxGCPauseMillis") {
		t.Errorf("caveats %q", f.Recommendation.Caveats)
	}
	e.Collector, e.RegionSize = "Copy:MSC", 0
	if f := checkYoungGCFrequency(e); f == nil || !strings.HasPrefix(f.Recommendation.Apply[0], "restart the JVM with -Xmn") {
		t.Errorf("serial recommendation %+v", f)
	}
}

// The prediction runs at the observed production rate, never at the rate
// perfscope's own closed-loop load reached, and divides by the Eden G1
// actually collects at.
func TestYoungGCPredictionRate(t *testing.T) {
	e := busyJVM()
	e.TargetRPS = 0
	e.RequestRate = evidence.Float(9000)
	e.RateIsSaturation = true
	if f := checkYoungGCFrequency(e); f != nil {
		t.Errorf("predicted at a saturation rate: %s", f.Title)
	}
	e.RateIsSaturation = false
	e.RequestRate = evidence.Float(200)
	f := checkYoungGCFrequency(e)
	if f == nil || !strings.Contains(f.Title, "at 200 requests/s") || !strings.Contains(strings.Join(f.Evidence, "\n"), "(observed)") {
		t.Fatalf("observed rate: %+v", f)
	}
	// 300 KB × 200/s = 58.6 MB/s into 64 MB → 54.9/min; into 60 MB → 58.6/min.
	e.EdenAtCollection, e.EdenAtCollectionSource = 60<<20, "hsperfdata-cycle"
	if f := checkYoungGCFrequency(e); f == nil || !strings.HasPrefix(f.Title, "59 young GCs per minute") {
		t.Errorf("eden at collection: %+v", f)
	}
	e.BytesPerRequest = nil
	if f := checkYoungGCFrequency(e); f != nil {
		t.Error("prediction without bytes per request")
	}
}

// Logging advice reduces bytes: no async appender, which only moves them.
func TestLoggingRecommendationReducesBytes(t *testing.T) {
	e := busyJVM()
	e.Endpoints = []evidence.EndpointAlloc{{Endpoint: "/api/orders-logged/{id}", Method: "GET", LoggingBytesPerRequest: evidence.Float(2048)}}
	f := checkLoggingAllocation(e, nil)
	if f == nil {
		t.Fatal("silent")
	}
	code := f.Recommendation.Code[0].Code
	if strings.Contains(code, "AsyncAppender") || !strings.Contains(code, "isDebugEnabled") || !strings.Contains(code, "garbage-free") {
		t.Errorf("code sketch %q", code)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "+2.0 KB per request from logging on GET /api/orders-logged/{id}") {
		t.Errorf("evidence %q", f.Evidence)
	}
}

func TestJVMRulesRank(t *testing.T) {
	fs := Run(JVMRules, busyJVM())
	if len(fs) != 5 {
		t.Fatalf("%d findings, want 5", len(fs))
	}
	if fs[0].ID != "jvm.young-gc-frequency" {
		t.Errorf("first finding %s", fs[0].ID)
	}
	if len(Run(JVMRules, quietJVM())) != 0 {
		t.Error("quiet JVM has findings")
	}
}
