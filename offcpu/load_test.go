package offcpu

import (
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// A stepped load is bounded in time and requests per level; Check refuses
// the bounds `perfscope load` does not run, naming the flag.
func TestLoadOptionsCheck(t *testing.T) {
	good := LoadOptions{Spec: httpload.Spec{Timeout: time.Second}, PerLevel: 5 * time.Second, Probe: probe.Options{StackEvery: 1}}
	if err := good.Check(); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	for _, c := range []struct {
		change func(*LoadOptions)
		want   string
	}{
		{func(o *LoadOptions) { o.PerLevel = 99 * time.Millisecond }, "--duration-per-level must be between 100ms and 10m0s, got 99ms: every level is bounded in time"},
		{func(o *LoadOptions) { o.PerLevel = time.Hour }, "--duration-per-level must be between 100ms and 10m0s, got 1h0m0s"},
		{func(o *LoadOptions) { o.RequestsPerLevel = -1 }, "--requests-per-level must be between 0 and 10000000, got -1"},
		{func(o *LoadOptions) { o.RequestsPerLevel = MaxRequestsPerLevel + 1 }, "--requests-per-level must be between 0 and 10000000, got 10000001"},
		{func(o *LoadOptions) { o.Spec.Timeout = 0 }, "--timeout must be positive, got 0s"},
		{func(o *LoadOptions) { o.Probe.StackEvery = 0 }, "--stack-every must be between 1 and"},
		{func(o *LoadOptions) { o.Probe.StackEvery = probe.MaxStackEvery + 1 }, "--stack-every must be between 1 and"},
	} {
		o := good
		c.change(&o)
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check() = %v, want %q", err, c.want)
		}
	}
}
