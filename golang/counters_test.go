package golang

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/probes"
)

// fakeCount is a passive request count whose programs count their own
// runs (or fail to be read).
type fakeCount struct {
	readings []probes.SelfCosts
	err      error
}

func (f *fakeCount) Begin(context.Context) error                    { return nil }
func (f *fakeCount) End(context.Context) (jvm.RequestCounts, error) { return jvm.RequestCounts{}, nil }
func (f *fakeCount) Close()                                         {}
func (f *fakeCount) SelfCosts() (probes.SelfCosts, error) {
	if f.err != nil {
		return nil, f.err
	}
	r := f.readings[0]
	f.readings = f.readings[1:]
	return r, nil
}

// The passive count's programs are costed over the window from their own
// counters; when those cannot be read the report says so instead of
// leaving them out of the table silently.
func TestPassiveCountCosts(t *testing.T) {
	hook := "sock:sock_send_length"
	f := &fakeCount{readings: []probes.SelfCosts{
		{hook: {{Runs: 100, TimedRuns: 2, TimedNs: 1000}, {Runs: 50}}},
		{hook: {{Runs: 1100, TimedRuns: 18, TimedNs: 9000}, {Runs: 450, TimedRuns: 4, TimedNs: 2000}}},
	}}
	c := &counters{passive: f}
	if err := c.begin(context.Background()); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	got := c.costs(&warnings)
	if len(got) != 1 || got[0].Program != hook || got[0].RunCount != 1400 || got[0].PerRunNs != 500 || len(warnings) != 0 {
		t.Errorf("costs %+v, warnings %q; want 1,400 runs of %s at 500 ns", got, warnings, hook)
	}
	c = &counters{passive: &fakeCount{err: errors.New("map gone")}}
	if err := c.begin(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.costs(&warnings); got != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "own cost is not in the table") {
		t.Errorf("unreadable counters: costs %+v, warnings %q", got, warnings)
	}
	if got := (&counters{}).costs(&warnings); got != nil || len(warnings) != 1 {
		t.Errorf("no passive count: costs %+v, warnings %q", got, warnings)
	}
}
