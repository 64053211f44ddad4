package recipes

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// fakeHooks is a probe with one hook group whose programs "run" at a
// fixed rate on one CPU while attached: what a per-packet tracepoint does
// under steady traffic, without BPF. Its runs are computed from the same
// instants its switch returns, so a correct estimator recovers them.
type fakeHooks struct {
	mu       sync.Mutex
	rate     float64 // runs per second while attached
	cpu      int
	perRun   time.Duration
	since    time.Time // attached since; zero when detached
	runs     float64
	switches int
	group    *probes.HookGroup
}

func newFakeHooks(name string, class probes.Class, rate float64, cpu int, perRun time.Duration) *fakeHooks {
	f := &fakeHooks{rate: rate, cpu: cpu, perRun: perRun, since: time.Now()}
	f.group = &probes.HookGroup{Name: name, Class: class, Hooks: []string{name + ":hook"}, Switch: f}
	return f
}

func (f *fakeHooks) Attach() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if f.since.IsZero() {
		f.since = now
		f.switches++
	}
	return now, nil
}

func (f *fakeHooks) Detach() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if !f.since.IsZero() {
		f.runs += f.rate * now.Sub(f.since).Seconds()
		f.since = time.Time{}
		f.switches++
	}
	return now, nil
}

func (f *fakeHooks) IsAttached() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.since.IsZero()
}

func (f *fakeHooks) SelfCosts() (probes.SelfCosts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	runs := f.runs
	if !f.since.IsZero() {
		runs += f.rate * time.Since(f.since).Seconds()
	}
	perCPU := make([]probes.SelfRuns, f.cpu+1)
	n := uint64(runs)
	perCPU[f.cpu] = probes.SelfRuns{Runs: n, TimedRuns: n / 64, TimedNs: n / 64 * uint64(f.perRun)}
	return probes.SelfCosts{f.group.Hooks[0]: perCPU}, nil
}

func (f *fakeHooks) HookGroups() []*probes.HookGroup { return []*probes.HookGroup{f.group} }
func (f *fakeHooks) Method() probes.AttachMethod     { return probes.MethodBTF }
func (f *fakeHooks) Costs() []probes.ProgramCost     { return nil }
func (f *fakeHooks) Missing() map[string]error       { return nil }
func (f *fakeHooks) Close() error                    { return nil }
func (f *fakeHooks) runsNow() float64 {
	c, _ := f.SelfCosts()
	return float64(probes.Total(c[f.group.Hooks[0]]).Runs)
}

// hooksPart is a part holding fake hook groups; it records the coverage
// it was given.
type hooksPart struct {
	hooks []*fakeHooks
	cov   *Coverage
	first []float64
	last  []float64
}

func (p *hooksPart) Open(Sources) error { return nil }
func (p *hooksPart) Probes() []probes.Probe {
	var out []probes.Probe
	for _, h := range p.hooks {
		out = append(out, h)
	}
	return out
}
func (p *hooksPart) Begin(context.Context) error {
	p.first = nil
	for _, h := range p.hooks {
		p.first = append(p.first, h.runsNow())
	}
	return nil
}
func (p *hooksPart) End(context.Context) error {
	p.last = nil
	for _, h := range p.hooks {
		p.last = append(p.last, h.runsNow())
	}
	return nil
}
func (p *hooksPart) SetCoverage(c *Coverage) { p.cov = c }

func fakeSources(entry time.Duration) Sources {
	return Sources{Probes: Opener{EntryCost: func() (time.Duration, error) { return entry, nil }}}
}

// Under steady events the governor keeps the busiest CPU within the
// budget, detaches the per-packet group between windows, and the scaled
// count lands on what happened; a cheap batch group stays attached and
// exact. No timing is asserted: the windows' lengths are whatever the
// scheduler gave, and the estimator is exact for a steady rate whatever
// they are.
func TestGovernorKeepsTheBudgetAndEstimates(t *testing.T) {
	// 1 M runs/s at 100 ns + 50 ns entry: 15 % of CPU 1 while attached.
	packets := newFakeHooks("fake/packets", probes.PerPacket, 1e6, 1, 100*time.Nanosecond)
	// 1 000 runs/s: 0.015 % of CPU 0, well within half the budget.
	batches := newFakeHooks("fake/batches", probes.Batch, 1e3, 0, 100*time.Nanosecond)
	part := &hooksPart{hooks: []*fakeHooks{packets, batches}}
	s, err := Open(fakeSources(50*time.Nanosecond), part)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.Measure(context.Background(), Window{Duration: 1500 * time.Millisecond,
		Budget: Budget{CPUShare: 0.015, Period: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ov := run.Overhead
	if ov.Budget == nil || len(ov.Budget.Groups) != 2 || ov.CPUCost == nil {
		t.Fatalf("overhead %+v", ov)
	}
	t.Logf("cost: %+v", *ov.CPUCost)
	// A few periods of EWMA warm-up are allowed over the budget: half
	// again is a failure of the governor, not of the scheduler.
	if ov.CPUCost.MaxShare > 1.5*0.015 || ov.CPUCost.MaxCPU != 1 {
		t.Errorf("busiest CPU %d took %.2f %%, budget 1.5 %%", ov.CPUCost.MaxCPU, 100*ov.CPUCost.MaxShare)
	}
	if packets.IsAttached() || !batches.IsAttached() || packets.switches < 10 {
		t.Errorf("per-packet attached %v after %d switches, batch attached %v", packets.IsAttached(), packets.switches, batches.IsAttached())
	}
	e := part.cov.Estimate("fake/packets")
	if e == nil || part.cov.Estimate("fake/batches") != nil {
		t.Fatalf("estimates: packets %v, batches %v", e, part.cov.Estimate("fake/batches"))
	}
	t.Logf("packets: %s, scale %.1f", e, e.Scale)
	if e.Coverage < 0.02 || e.Coverage > 0.2 || e.Windows < 10 || e.RelError == nil {
		t.Errorf("estimate %+v", *e)
	}
	seen := part.last[0] - part.first[0]
	truth := packets.rate * run.Duration().Seconds()
	if got := seen * e.Scale; math.Abs(got-truth)/truth > 0.03 {
		t.Errorf("estimated %.0f runs, %.0f happened (seen %.0f)", got, truth, seen)
	}
	if got, want := batches.rate*run.Duration().Seconds(), part.last[1]-part.first[1]; math.Abs(got-want) > 2 {
		t.Errorf("batch group counted %.0f of %.0f", want, got)
	}
	// A later exact window attaches everything again.
	if _, err := s.Measure(context.Background(), Window{Duration: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if !packets.IsAttached() || part.cov.Estimate("fake/packets") != nil {
		t.Error("an exact window after a budgeted one left the per-packet group detached")
	}
}

func rates(v ...float64) []float64 { return v }

// The plan: a batch group that takes more than half the budget is sampled
// (lowest priority first) and comes back when it fits; the sampled groups
// share what is left on the tightest CPU; windows too short stretch the
// period.
func TestGovernorPlan(t *testing.T) {
	mk := func(name string, class probes.Class, prio int, r []float64) *governedGroup {
		return &governedGroup{hg: &probes.HookGroup{Name: name, Class: class}, priority: prio, rate: r}
	}
	const s = 1e9 // ns per second
	g := &governor{budget: Budget{CPUShare: 0.02, Period: time.Second}, cpus: 2, fixRate: rates(0, 0)}
	napi := mk("napi", probes.Batch, 3, rates(0.001*s, 0))
	soft := mk("softirq", probes.Batch, 2, rates(0.015*s, 0.001*s))
	pkts := mk("packets", probes.PerPacket, 0, rates(0.02*s, 0.08*s))
	g.groups = []*governedGroup{napi, soft, pkts}

	duty, period := g.plan()
	if !soft.demoted || napi.demoted {
		t.Fatalf("softirq (1.6 %% of CPU 0 with NAPI, over half of 2 %%) demoted %v, napi %v", soft.demoted, napi.demoted)
	}
	// CPU 1: 2 % left (no exact group there) for 0.1 % (softirq) + 8 %
	// (packets) sampled; CPU 0 leaves more.
	if want := 0.02 / 0.081; math.Abs(duty-want) > 1e-9 || period != time.Second {
		t.Errorf("duty %v period %v, want %v and 1s", duty, period, want)
	}
	// Traffic falls: softirq fits again under 40 % of the budget.
	soft.rate = rates(0.005*s, 0)
	if g.plan(); soft.demoted {
		t.Error("softirq at 0.6 % with NAPI stays demoted")
	}
	// A flood: the duty would give windows under 5 ms; the period
	// stretches so each window is 5 ms.
	pkts.rate = rates(0, 10*s)
	duty, period = g.plan()
	if w := time.Duration(duty * float64(period)); w != minSampleWindow || period > maxBudgetPeriod {
		t.Errorf("window %v of %v", w, period)
	}
	// An unmeasured group gets the first short window.
	pkts.rate = nil
	if duty, _ := g.plan(); duty != firstDuty {
		t.Errorf("duty %v for an unmeasured group", duty)
	}
}

func TestEstimateOf(t *testing.T) {
	sec := time.Second
	steady := []samplePeriod{{sec, 100 * time.Millisecond, 1000}, {sec, 50 * time.Millisecond, 500}, {sec, 200 * time.Millisecond, 2000}}
	e := estimateOf(steady)
	if e.Windows != 3 || math.Abs(e.Scale*3500-30000) > 1e-6 || e.RelError == nil || *e.RelError > 1e-9 {
		t.Errorf("steady: %+v (scale×seen %.0f)", e, e.Scale*3500)
	}
	if math.Abs(e.Coverage-350.0/3000) > 1e-9 {
		t.Errorf("coverage %v", e.Coverage)
	}
	// A period that ended before its window opened takes the mean rate.
	cut := append(steady, samplePeriod{sec / 2, 0, 0})
	if e := estimateOf(cut); math.Abs(e.Scale*3500-35000) > 1e-6 {
		t.Errorf("cut: %.0f", e.Scale*3500)
	}
	// Moving rates: a bound, wider with less coverage.
	moving := []samplePeriod{{sec, 100 * time.Millisecond, 1000}, {sec, 100 * time.Millisecond, 3000}, {sec, 100 * time.Millisecond, 1000}, {sec, 100 * time.Millisecond, 3000}}
	m := estimateOf(moving)
	full := []samplePeriod{{sec, 900 * time.Millisecond, 9000}, {sec, 900 * time.Millisecond, 27000}, {sec, 900 * time.Millisecond, 9000}, {sec, 900 * time.Millisecond, 27000}}
	f := estimateOf(full)
	if m.RelError == nil || f.RelError == nil || *m.RelError <= *f.RelError || *f.RelError <= 0 {
		t.Errorf("moving: %v, nearly full coverage: %v", m, f)
	}
	// One window: no bound; nothing seen: no bound, scale by coverage.
	if e := estimateOf(steady[:1]); e.RelError != nil {
		t.Errorf("one window: %v", e)
	}
	if e := estimateOf([]samplePeriod{{sec, 100 * time.Millisecond, 0}, {sec, 100 * time.Millisecond, 0}}); e.RelError != nil || e.Scale != 10 {
		t.Errorf("nothing seen: %+v", e)
	}
	rel := 0.1
	row := (&evidence.Estimate{RelError: &rel}).RowError(400)
	if row == nil || math.Abs(*row-math.Hypot(0.1, 1.96/20)) > 1e-12 {
		t.Errorf("row error %v", row)
	}
}

func TestCoverageScaleBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := &Coverage{groups: map[string]groupCoverage{
		"g":     {spans: []span{{at(100), at(200)}, {at(1100), at(1150)}}},
		"exact": {exact: true},
	}}
	if k := c.ScaleBetween("g", at(0), at(1000)); k != 10 {
		t.Errorf("first second: %v", k)
	}
	if k := c.ScaleBetween("g", at(0), at(2000)); k != 2000.0/150 {
		t.Errorf("two seconds: %v", k)
	}
	if k := c.ScaleBetween("g", at(300), at(1000)); k != 0 {
		t.Errorf("never attached: %v", k)
	}
	if c.ScaleBetween("exact", at(0), at(1000)) != 1 || c.ScaleBetween("unknown", at(0), at(1000)) != 1 || (*Coverage)(nil).ScaleBetween("g", at(0), at(1)) != 1 {
		t.Error("exact, unknown and nil coverage scale by 1")
	}
}
