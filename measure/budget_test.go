package measure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/udpsock"
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

// Costly switching stretches the default period until the period's
// attaches and detaches take a quarter of the budget, windows stretching
// with it (same duty); a period the caller gave is kept, and cheap
// switching leaves the default second.
func TestGovernorPlanStretchesForSwitching(t *testing.T) {
	const s = 1e9
	pkts := &governedGroup{hg: &probes.HookGroup{Name: "packets", Class: probes.PerPacket}, rate: rates(0.1*s, 0.1*s)}
	sock := &governedGroup{hg: &probes.HookGroup{Name: "sockets", Class: probes.PerPacket}, rate: rates(0.1*s, 0.1*s)}
	g := &governor{budget: Budget{CPUShare: 0.02}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{pkts, sock}}
	base, _ := g.plan()
	// Two groups, an attach and a detach each, 2 ms a switch: 8 ms a
	// period, a quarter of 2 % is 5 ms a second: 1.6 s.
	pkts.switchNs, sock.switchNs = 2e6, 2e6
	duty, period := g.plan()
	if duty != base || period != 1600*time.Millisecond {
		t.Errorf("duty %v (was %v), period %v, want 1.6s", duty, base, period)
	}
	// Costlier still: the period stops at its longest.
	pkts.switchNs, sock.switchNs = 20e6, 20e6
	if _, period := g.plan(); period != maxBudgetPeriod {
		t.Errorf("period %v, want %v", period, maxBudgetPeriod)
	}
	// Cheap switching: the default second.
	pkts.switchNs, sock.switchNs = 0.1e6, 0.1e6
	if _, period := g.plan(); period != DefaultBudgetPeriod {
		t.Errorf("period %v, want the default", period)
	}
	// A timeline's interval is the period, whatever switching costs.
	g.budget.Period = 500 * time.Millisecond
	pkts.switchNs, sock.switchNs = 20e6, 20e6
	if _, period := g.plan(); period != 500*time.Millisecond {
		t.Errorf("period %v, want the interval's 500ms", period)
	}
}

// The process's own CPU comes off the programs' share of the budget: a
// process at 0.5 % of every CPU leaves the programs 1.5 % of 2 %, and one
// busier than half the budget still leaves the programs half of it.
func TestGovernorBudgetsTheProcess(t *testing.T) {
	const s = 1e9
	pkts := &governedGroup{hg: &probes.HookGroup{Name: "packets", Class: probes.PerPacket}, rate: rates(0.1*s, 0.1*s)}
	var cpu time.Duration
	g := &governor{budget: Budget{CPUShare: 0.02}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{pkts},
		cpuTime: func() time.Duration { return cpu }}
	if duty, _ := g.plan(); math.Abs(duty-0.2) > 1e-9 {
		t.Fatalf("duty %v without a process cost, want 0.2", duty)
	}
	// A second in which the process took 10 ms: 0.5 % of each of 2 CPUs.
	cpu = 10 * time.Millisecond
	g.measureProcess(time.Second)
	if duty, _ := g.plan(); math.Abs(duty-0.15) > 1e-9 {
		t.Errorf("duty %v with the process at 0.5 %%, want 0.15", duty)
	}
	// The process's rate falls halfway, as the groups' do.
	g.measureProcess(time.Second)
	if duty, _ := g.plan(); math.Abs(duty-0.175) > 1e-9 {
		t.Errorf("duty %v after a quiet second, want 0.175", duty)
	}
	// A busy second (symbols read: 100 ms, 5 % of every CPU): the
	// programs keep half the budget.
	cpu += 100 * time.Millisecond
	g.measureProcess(time.Second)
	if duty, _ := g.plan(); math.Abs(duty-0.1) > 1e-9 {
		t.Errorf("duty %v with the process over the budget, want 0.1", duty)
	}
	if g.procSpent != 110*time.Millisecond {
		t.Errorf("process spent %v over the periods, want 110ms", g.procSpent)
	}
}

func TestEstimateOf(t *testing.T) {
	sec := time.Second
	steady := []samplePeriod{sp(sec, 100*time.Millisecond, 1000), sp(sec, 50*time.Millisecond, 500), sp(sec, 200*time.Millisecond, 2000)}
	e := estimateOf(steady, "")
	if e.Windows != 3 || math.Abs(e.Scale*3500-30000) > 1e-6 || e.RelError == nil || *e.RelError > 1e-9 {
		t.Errorf("steady: %+v (scale×seen %.0f)", e, e.Scale*3500)
	}
	if math.Abs(e.Coverage-350.0/3000) > 1e-9 {
		t.Errorf("coverage %v", e.Coverage)
	}
	// A period that ended before its window opened takes the mean rate.
	cut := append(steady, sp(sec/2, 0, 0))
	if e := estimateOf(cut, ""); math.Abs(e.Scale*3500-35000) > 1e-6 {
		t.Errorf("cut: %.0f", e.Scale*3500)
	}
	// Moving rates: a bound, wider with less coverage.
	moving := []samplePeriod{sp(sec, 100*time.Millisecond, 1000), sp(sec, 100*time.Millisecond, 3000), sp(sec, 100*time.Millisecond, 1000), sp(sec, 100*time.Millisecond, 3000)}
	m := estimateOf(moving, "")
	full := []samplePeriod{sp(sec, 900*time.Millisecond, 9000), sp(sec, 900*time.Millisecond, 27000), sp(sec, 900*time.Millisecond, 9000), sp(sec, 900*time.Millisecond, 27000)}
	f := estimateOf(full, "")
	if m.RelError == nil || f.RelError == nil || *m.RelError <= *f.RelError || *f.RelError <= 0 {
		t.Errorf("moving: %v, nearly full coverage: %v", m, f)
	}
	// One window: no bound; nothing seen: no bound, scale by coverage.
	if e := estimateOf(steady[:1], ""); e.RelError != nil {
		t.Errorf("one window: %v", e)
	}
	if e := estimateOf([]samplePeriod{sp(sec, 100*time.Millisecond, 0), sp(sec, 100*time.Millisecond, 0)}, ""); e.RelError != nil || e.Scale != 10 {
		t.Errorf("nothing seen: %+v", e)
	}
	// A flood that begins 300 ms into a period planned from quiet ones:
	// its window opened with the period and the guard ended it 50 ms into
	// the flood. Scaled by time, the window's mean rate (quiet part
	// included) would put 14 300 runs in a period that held 70 000; the
	// rate of the window's end carries the rest of the period.
	const R = 100000.0 // runs per second in the flood
	step := samplePeriod{length: sec, on: 350 * time.Millisecond, runs: uint64(0.05 * R), tailRate: R}
	flood := sp(sec, 100*time.Millisecond, uint64(0.1*R))
	quiet := sp(sec, sec, 0)
	run := []samplePeriod{quiet, step, flood, flood, flood}
	truth := 0.7*R + 3*R
	if e := estimateOf(run, ""); math.Abs(e.Scale*float64(e.SampledEvents)-truth) > 1 {
		t.Errorf("flood starting mid-period: estimated %.0f, ran %.0f", e.Scale*float64(e.SampledEvents), truth)
	}
	step.tailRate = 0
	if e := estimateOf([]samplePeriod{quiet, step, flood, flood, flood}, ""); math.Abs(e.Scale*float64(e.SampledEvents)-truth) < 0.1*truth {
		t.Errorf("without the tail rate the estimate is %.0f, %.0f ran: the case does not test the tail", e.Scale*float64(e.SampledEvents), truth)
	}
	rel := 0.1
	row := (&evidence.Estimate{RelError: &rel, SampledEvents: 10000}).RowError(400)
	if row == nil || math.Abs(*row-math.Hypot(0.1, 1.96/20)) > 1e-12 {
		t.Errorf("row error %v", row)
	}
	// A row of every sampled event is the section's total.
	if row := (&evidence.Estimate{RelError: &rel, SampledEvents: 400}).RowError(400); row == nil || *row != rel {
		t.Errorf("the whole section's row: %v", row)
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

// setRate changes the fake's event rate now, keeping the runs so far.
func (f *fakeHooks) setRate(rate float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.since.IsZero() {
		now := time.Now()
		f.runs += f.rate * now.Sub(f.since).Seconds()
		f.since = now
	}
	f.rate = rate
}

// When the traffic (and so the per-packet hooks' cost) rises twentyfold
// mid-window, the governor shortens the sampling windows within a few
// periods and the periods after that stay within the budget; the batch
// group stays exact throughout. The costs are the fake's, computed from
// the attached spans the governor chose: what is asserted is the
// governor's arithmetic, not how fast anything ran.
func TestGovernorShortensWindowsWhenCostRises(t *testing.T) {
	const budget = 0.05
	perRun, entry := 100*time.Nanosecond, 50*time.Nanosecond
	// 1e5 runs/s × 150 ns = 1.5 % of CPU 1 attached; then 2e6: 30 %.
	packets := newFakeHooks("fake/packets", probes.PerPacket, 1e5, 1, perRun)
	batches := newFakeHooks("fake/batches", probes.Batch, 1e3, 0, perRun)
	part := &hooksPart{hooks: []*fakeHooks{packets, batches}}
	s, err := Open(fakeSources(entry), part)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	step := time.AfterFunc(time.Second, func() { packets.setRate(2e6) })
	defer step.Stop()
	if _, err := s.Measure(context.Background(), Window{Duration: 2500 * time.Millisecond,
		Budget: Budget{CPUShare: budget, Period: 100 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	var pg *governedGroup
	for _, gg := range s.gov.groups {
		if gg.hg.Name == "fake/packets" {
			pg = gg
		}
	}
	ps := pg.periods
	if len(ps) < 20 {
		t.Fatalf("%d periods in 2.5 s of 100 ms", len(ps))
	}
	duty := func(p samplePeriod) float64 { return p.on.Seconds() / p.length.Seconds() }
	cost := func(p samplePeriod) float64 {
		return float64(p.runs) * float64(perRun+entry) / float64(p.length)
	}
	// Before the step: 1.5 % attached fits the 5 % budget, so the group
	// stays attached for all of each period (duty above attachAllAbove).
	early := ps[3:8]
	// Steady state after the step: from the fifth period after it.
	late := ps[len(ps)-8 : len(ps)-1]
	var earlyDuty, lateDuty, lateCost float64
	for _, p := range early {
		earlyDuty += duty(p) / float64(len(early))
	}
	for _, p := range late {
		lateDuty += duty(p) / float64(len(late))
		lateCost += cost(p) / float64(len(late))
		// One late timer may overrun a window (at 30 % of the CPU a
		// 25 ms delay is 7.5 points); a period at over three times the
		// budget is the governor's fault.
		if c := cost(p); c > 3*budget {
			t.Errorf("a period after the step cost %.2f %% of the CPU, budget %.0f %% (%+v)", 100*c, 100*budget, p)
		}
	}
	// The period after the one the flood began in is planned from the
	// flood's own rate, not from its average with the quiet periods
	// before: averaged, its window came out twice too long and it cost
	// about twice the budget.
	rate := func(p samplePeriod) float64 { return float64(p.runs) / p.on.Seconds() }
	for i, p := range ps[:len(ps)-1] {
		if p.on > 0 && rate(p) > 2e5 {
			// 1.8×: room for a late timer on a loaded machine; averaged
			// with the quiet periods it cost 2.3–2.4×.
			if c := cost(ps[i+1]); c > 1.8*budget {
				t.Errorf("the period after the rise cost %.2f %% of the CPU, budget %.0f %% (%+v)", 100*c, 100*budget, ps[i+1])
			}
			break
		}
	}
	t.Logf("duty before the step %.2f, after %.2f; cost after %.2f %%", earlyDuty, lateDuty, 100*lateCost)
	if lateCost > 1.2*budget {
		t.Errorf("after the step the periods cost %.2f %% of the CPU on average, budget %.0f %%", 100*lateCost, 100*budget)
	}
	if earlyDuty < 0.8 || lateDuty > 0.5 || lateDuty > earlyDuty/1.5 {
		t.Errorf("duty %.2f before a twentyfold rise and %.2f after: the windows did not shorten to the budget (want about %.2f)", earlyDuty, lateDuty, budget/0.3)
	}
	if !batches.IsAttached() || part.cov.Estimate("fake/batches") != nil {
		t.Error("the cheap batch group was sampled")
	}
	if e := part.cov.Estimate("fake/packets"); e == nil || e.RelError == nil {
		t.Errorf("per-packet estimate %v", e)
	}
}

// The 95 % bound of estimateOf covers the truth in about 95 % of runs on
// synthetic traffic that is bursty within each period (a random walk of
// the rate, Poisson arrivals) and sampled in windows at random offsets —
// the traffic the governor meets, with the truth known. Below 90 % the
// bound would be a lie. Each run is planned as the governor plans one:
// ten 1 s periods with windows of 2–10 % of each (as before the run's
// length planned them), and runs of 4 s, 5 s and 10 s whose periods the
// governor chose from their length and the budget, every run with at
// least boundWindows windows. Scaled by time, and by a reference whose
// share the programs count (a port's reads among other readers', its
// share drifting): the socket reads' estimate.
func TestEstimateBoundCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	poisson := func(lambda float64) float64 {
		if lambda <= 0 {
			return 0
		}
		return math.Max(0, math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64()))
	}
	const trials, slot = 400, 5 * time.Millisecond
	// plan returns the next period and its window's length.
	type planner func(start time.Time, done []samplePeriod) (time.Duration, time.Duration)
	fixed := func(time.Time, []samplePeriod) (time.Duration, time.Duration) {
		return time.Second, time.Duration((0.02 + 0.08*rng.Float64()) * float64(time.Second))
	}
	// governed plans like the governor, for a sampled group whose
	// programs would take 15–75 % of a CPU attached (windows of 2–10 %
	// of the budget's 1.5 %) and switch in 0.3 ms.
	governed := func(length time.Duration) (planner, func()) {
		var g *governor
		reset := func() {
			cost := 0.015 * 1e9 / (0.02 + 0.08*rng.Float64())
			gg := &governedGroup{hg: &probes.HookGroup{Name: "g", Class: probes.PerPacket}, rate: rates(cost, cost), switchNs: 0.3e6}
			g = &governor{budget: Budget{CPUShare: DefaultBudget}, cpus: 2, fixRate: rates(0, 0),
				groups: []*governedGroup{gg}, length: length, began: time.Unix(1000, 0)}
		}
		return func(start time.Time, done []samplePeriod) (time.Duration, time.Duration) {
			g.periodStart, g.groups[0].periods = start, done
			duty, period := g.plan()
			return period, time.Duration(duty * float64(period))
		}, reset
	}
	type run struct {
		name   string
		length time.Duration
		plan   planner
		reset  func()
		share  bool
	}
	runs := []run{
		{name: "10 × 1 s, by time", length: 10 * time.Second, plan: fixed},
		{name: "10 × 1 s, by a counted share", length: 10 * time.Second, plan: fixed, share: true},
	}
	for _, l := range []time.Duration{4 * time.Second, 5 * time.Second, 10 * time.Second} {
		for _, share := range []bool{false, true} {
			p, reset := governed(l)
			name := fmt.Sprintf("%v planned, by time", l)
			if share {
				name = fmt.Sprintf("%v planned, by a counted share", l)
			}
			runs = append(runs, run{name: name, length: l, plan: p, reset: reset, share: share})
		}
	}
	for _, c := range runs {
		covered, withBound, fewWindows := 0, 0, 0
		var bounds float64
		for trial := 0; trial < trials; trial++ {
			if c.reset != nil {
				c.reset()
			}
			var ps []samplePeriod
			var truth float64
			rate := 2e4 * (0.5 + rng.Float64()) // events per second
			share := 0.5 + 0.5*rng.Float64()    // the port's share of the reads
			start, end := time.Unix(1000, 0), time.Unix(1000, 0).Add(c.length)
			for start.Before(end) {
				period, window := c.plan(start, ps)
				period = min(period, end.Sub(start))
				slots := int(period / slot)
				w := min(slots, int(window/slot))
				at := rng.IntN(slots - w + 1)
				var seen, ref, in float64
				for j := 0; j < slots; j++ {
					// A multiplicative random walk, bounded: bursts and lulls.
					rate = math.Min(1e5, math.Max(1e3, rate*math.Exp(0.05*rng.NormFloat64())))
					share = math.Min(1, math.Max(0.3, share+0.01*rng.NormFloat64()))
					all := poisson(rate * slot.Seconds())
					mine := all
					if c.share {
						mine = math.Round(all * share)
					}
					truth += mine
					ref += all
					if j >= at && j < at+w {
						seen += mine
						in += all
					}
				}
				p := samplePeriod{length: time.Duration(slots) * slot, on: time.Duration(w) * slot, runs: uint64(seen)}
				if c.share {
					p.ref, p.refOK, p.events, p.counted, p.inRef, p.ownRef = uint64(ref), true, uint64(seen), true, uint64(in), true
				}
				ps = append(ps, p)
				start = start.Add(p.length)
			}
			ref := ""
			if c.share {
				ref = UDPReadsReference
			}
			e := estimateOf(ps, ref)
			if e.Windows < boundWindows {
				fewWindows++
			}
			if e.RelError == nil {
				continue
			}
			withBound++
			bounds += *e.RelError
			est := e.Scale * float64(e.SampledEvents)
			if math.Abs(est-truth) <= *e.RelError*est {
				covered++
			}
		}
		share := float64(covered) / float64(withBound)
		t.Logf("%s: the bound (±%.1f %% on average) covered the truth in %d of %d runs (%.1f %%)",
			c.name, 100*bounds/float64(withBound), covered, withBound, 100*share)
		if withBound < trials*9/10 || share < 0.90 {
			t.Errorf("%s: the 95 %% bound covered the truth in %.1f %% of %d runs", c.name, 100*share, withBound)
		}
		if fewWindows > 0 {
			t.Errorf("%s: %d of %d runs had fewer than %d windows", c.name, fewWindows, trials, boundWindows)
		}
	}
}

func sp(length, on time.Duration, runs uint64) samplePeriod {
	return samplePeriod{length: length, on: on, runs: runs}
}

// The hooks slow the traffic they sample (their cost is paid by the
// packets inside the windows): scaled by time, the windows' slower rate
// under-counts the run; scaled by an exact reference that counted the
// same slowed traffic inside the windows and the full traffic outside,
// the estimate lands on the truth and says what it was scaled by.
func TestEstimateByReferenceCorrectsTheHooksOwnSlowdown(t *testing.T) {
	const rate, slowed = 1e6, 0.75 // packets/s; 25 % slower while attached
	var ps []samplePeriod
	var truth float64
	for i := 0; i < 10; i++ {
		on := time.Duration(50+10*i) * time.Millisecond
		inside := rate * slowed * on.Seconds()
		outside := rate * (time.Second - on).Seconds()
		truth += inside + outside
		// One event per packet; the reference counts two per packet (rx
		// and tx of loopback).
		ps = append(ps, samplePeriod{length: time.Second, on: on, runs: uint64(inside),
			ref: uint64(2 * (inside + outside)), refOn: uint64(2 * inside), refOK: true})
	}
	byTime, byRef := estimateOf(ps, ""), estimateOf(ps, PacketsReference)
	est := func(e *evidence.Estimate) float64 { return e.Scale * float64(e.SampledEvents) }
	if est(byTime)/truth > 0.8 || byTime.Reference != "" {
		t.Errorf("by time: %.0f of %.0f (%+v)", est(byTime), truth, byTime)
	}
	if math.Abs(est(byRef)/truth-1) > 1e-6 || byRef.Reference != PacketsReference || byRef.RelError == nil || *byRef.RelError > 1e-6 {
		t.Errorf("by reference: %.0f of %.0f (%+v)", est(byRef), truth, byRef)
	}
	// Quiet periods before the traffic, the reference read and counting
	// nothing: still scaled by it, the quiet periods holding nothing.
	quiet := append([]samplePeriod{{length: time.Second, on: time.Second, refOK: true},
		{length: time.Second, on: time.Second, refOK: true}}, ps...)
	if e := estimateOf(quiet, PacketsReference); e.Reference != PacketsReference || math.Abs(est(e)/truth-1) > 1e-6 {
		t.Errorf("after quiet periods: %.0f of %.0f (%+v)", est(e), truth, e)
	}
	// A period without a usable reference: scaled by time throughout.
	ps[3].ref, ps[3].refOn, ps[3].refOK = 0, 0, false
	if e := estimateOf(ps, PacketsReference); e.Reference != "" {
		t.Errorf("a period without the reference still scaled by it: %+v", e)
	}
}

// The guard: a sampled group attached for the whole period (planned from
// a quiet one) is detached as soon as its cost in the period passes its
// allowance, long before the period ends.
func TestGovernorGuardEndsAWindowOverItsAllowance(t *testing.T) {
	flood := newFakeHooks("fake/packets", probes.PerPacket, 2e6, 1, 100*time.Nanosecond)
	g := newGovernor(Budget{CPUShare: 0.02}, []probes.Probe{flood}, 50*time.Nanosecond)
	gg := g.groups[0]
	gg.rate = make([]float64, g.cpus) // planned from quiet periods
	g.fixRate = make([]float64, g.cpus)
	g.last = g.readCounters()
	// Planned from quiet periods the window is not shortened, so the
	// guard allows the plain share: 2 % of a second, 20 ms of CPU 1, which
	// 2e6 runs/s at 150 ns (30 % of the CPU) spend in ~67 ms.
	allow := g.allowances(time.Second, 1)
	if a := allow[gg][1]; math.Abs(a-0.02*1e9) > 1 {
		t.Fatalf("allowance %v ns", a)
	}
	begin := time.Now()
	done := make(chan bool)
	go func() { done <- g.guardedSleep(begin.Add(3*time.Second), allow, true) }()
	var detached time.Duration
	for detached == 0 && time.Since(begin) < 3*time.Second {
		time.Sleep(5 * time.Millisecond)
		if !flood.IsAttached() {
			detached = time.Since(begin)
		}
	}
	if <-done {
		t.Fatal("stopped")
	}
	// Not a timing assertion: a whole period attached is what a missing
	// guard looks like; any detach before it ends is the guard's.
	if detached == 0 {
		t.Fatal("still attached after the whole period: the guard never ended the window")
	}
	t.Logf("detached after %v (its allowance is spent in ~67 ms)", detached)
}

// The socket group follows the namespace's UDP reads, every other group
// the packets through its interfaces; without a UDP reads counter the
// socket group follows the packets too, and without either, time.
func TestGovernorReferences(t *testing.T) {
	mk := func() *governor {
		return &governor{groups: []*governedGroup{
			{hg: &probes.HookGroup{Name: udpsock.Group, Class: probes.PerPacket}},
			{hg: &probes.HookGroup{Name: "netqueue/packets", Class: probes.PerPacket}},
		}}
	}
	packets := func() (uint64, error) { return 100, nil }
	reads := func() (uint64, error) { return 7, nil }
	g := mk()
	g.setReferences(packets, reads, nil)
	if g.groups[0].ref.name != UDPReadsReference || g.groups[0].ref.count() != 7 ||
		g.groups[1].ref.name != PacketsReference || g.groups[1].ref.count() != 100 || len(g.refs) != 2 {
		t.Errorf("references: sockets %+v, queues %+v", g.groups[0].ref, g.groups[1].ref)
	}
	g = mk()
	g.setReferences(packets, nil, nil)
	if g.groups[0].ref.name != PacketsReference || g.groups[1].ref.name != PacketsReference {
		t.Errorf("without UDP reads: sockets %+v, queues %+v", g.groups[0].ref, g.groups[1].ref)
	}
	g = mk()
	g.setReferences(nil, nil, nil)
	if g.groups[0].ref != nil || g.groups[1].ref != nil || g.groups[0].ref.count() != 0 {
		t.Error("references without counters")
	}
	// A failed read makes the period's reference unusable.
	bad := &reference{name: "x", read: func() (uint64, error) { return 0, errors.New("gone") }}
	if bad.count(); !bad.failed {
		t.Error("a failed read left the reference usable")
	}
}

// A reference read at both sides of a switch: its midpoint, half the
// difference as the edge's uncertainty, which widens the bound of a ratio
// estimate that is otherwise exact.
func TestReferenceEdges(t *testing.T) {
	if m, h := midpoint(100, 140); m != 120 || h != 20 {
		t.Errorf("midpoint(100, 140) = %d, %d", m, h)
	}
	if m, h := midpoint(100, 90); m != 90 || h != 0 {
		t.Errorf("a counter that went backwards: %d, %d", m, h)
	}
	sec := time.Second
	ps := []samplePeriod{
		{length: sec, on: 100 * time.Millisecond, runs: 1000, ref: 10000, refOn: 1000, refOK: true},
		{length: sec, on: 100 * time.Millisecond, runs: 2000, ref: 20000, refOn: 2000, refOK: true},
	}
	exact := estimateOf(ps, PacketsReference)
	ps[0].refSlack, ps[1].refSlack = 50, 100 // 5 % of each window's reference
	edged := estimateOf(ps, PacketsReference)
	if exact.RelError == nil || *exact.RelError > 1e-9 || edged.RelError == nil {
		t.Fatalf("exact %v, edged %v", exact, edged)
	}
	// 1.96 × √(500² + 1000²) / 30000 = 7.3 %.
	if want := 1.96 * math.Sqrt(500*500+1000*1000) / 30000; math.Abs(*edged.RelError-want) > 1e-9 {
		t.Errorf("bound %.4f, want %.4f", *edged.RelError, want)
	}
	if edged.Scale != exact.Scale {
		t.Errorf("the edges moved the estimate: %v vs %v", edged.Scale, exact.Scale)
	}
}

// One port's reads among others', scaled by the namespace's UDP reads:
// when the windows' hooks slow the port (and so the reference) the bound
// takes in how far the port's share may have moved; the sole reader's
// share cannot move, and packets scaling adds nothing.
func TestShareBias(t *testing.T) {
	sec := time.Second
	// Outside the windows 100 k reads/s, 80 % the port's; inside, the
	// port slowed by a quarter: 60 k + 20 k = 80 k/s, the port's share 75 %.
	var ps []samplePeriod
	for range 4 {
		ps = append(ps, samplePeriod{length: sec, on: 100 * time.Millisecond, runs: 6000,
			ref: 8000 + 90000, refOn: 8000, refOK: true})
	}
	// d = 1 − 80/100 = 0.2, s = 0.75: 0.2 × 0.25 / (0.75 × 0.8) = 8.3 %;
	// the truth is 80/75 − 1 = 6.7 % above the estimate.
	if b := shareBias(ps, UDPReadsReference); math.Abs(b-0.2*0.25/(0.75*0.8)) > 1e-9 {
		t.Errorf("bias %.4f", b)
	}
	e := estimateOf(ps, UDPReadsReference)
	truth := 4 * (6000 + 0.8*90000)
	if got := e.Scale * float64(e.SampledEvents); e.RelError == nil || math.Abs(got/truth-1) > *e.RelError {
		t.Errorf("estimate %.0f of %.0f outside its bound %v", got, truth, e)
	}
	if b := shareBias(ps, PacketsReference); b != 0 {
		t.Errorf("packets reference: bias %v", b)
	}
	for i := range ps {
		ps[i].runs = ps[i].refOn // the sole reader
	}
	if b := shareBias(ps, UDPReadsReference); b != 0 {
		t.Errorf("sole reader: bias %v", b)
	}
}

// The socket reads of a DNS server that is its namespace's only UDP
// reader, sampled in five windows: the socket probe's programs run for
// every socket read on the machine (the load generator's replies in
// another namespace too) and every wakeup, 3.5–6 runs per datagram the
// server read, moving from window to window. Scaled by runs, the
// server's reads came out off by a fifth with a wide bound; scaled by
// what the probe counted — the server's reads, and every UDP read of the
// namespace, at the same instants — its share is exactly 1 in every
// window and the estimate is the namespace's exact count, ±0. A port
// with a steady 80 % share gets 80 % of it, just as exactly.
func TestEstimateScalesTheCountedEventsByTheirShare(t *testing.T) {
	sec := time.Second
	runsPerRead := []float64{6, 3.5, 6, 3.5, 5}
	cover := []float64{0.10, 0.02, 0.10, 0.02, 0.05}
	var ps []samplePeriod
	var truth float64
	for i := range runsPerRead {
		ref := 100000.0 + 30000*float64(i%2) // the namespace's reads this period
		in := ref * cover[i]                 // while the group was attached
		truth += ref
		ps = append(ps, samplePeriod{length: sec, on: time.Duration(cover[i] * float64(sec)),
			runs: uint64(in * runsPerRead[i]), ref: uint64(ref), refOK: true,
			// The reference read on either side of each switch.
			refOn: uint64(in) + 40, refSlack: 60,
			events: uint64(in), counted: true, inRef: uint64(in), ownRef: true})
	}
	est := func(e *evidence.Estimate, seen float64) float64 { return e.Scale * seen }
	seenReads := 0.0
	for _, p := range ps {
		seenReads += float64(p.events)
	}
	e := estimateOf(ps, UDPReadsReference)
	if got := est(e, seenReads); math.Abs(got-truth) > 1e-6*truth || e.RelError == nil || *e.RelError > 1e-9 ||
		e.Reference != UDPReadsReference || e.SampledEvents != uint64(seenReads) || e.DurationFor10PctNs != 0 {
		t.Errorf("sole reader: estimated %.0f reads of %.0f (%+v, ±%s)", got, truth, e, pctOf(e.RelError))
	}
	// The same windows as the estimator read them before it used the
	// probe's counts: runs, and the reference's readings at the edges.
	old := append([]samplePeriod(nil), ps...)
	for i := range old {
		old[i].counted, old[i].ownRef = false, false
	}
	if o := estimateOf(old, UDPReadsReference); math.Abs(est(o, seenReads)/truth-1) < 0.05 {
		t.Errorf("scaled by runs the reads came out %.0f of %.0f: the case does not test the counts", est(o, seenReads), truth)
	}
	// A steady 80 % share among other readers (the same traffic every
	// period, so the windows' hooks slowed nothing: no share shift).
	truth = 0
	for i := range ps {
		ps[i].ref = 100000
		ps[i].inRef = uint64(100000 * cover[i])
		ps[i].events = uint64(0.8 * float64(ps[i].inRef))
		truth += 100000
	}
	e = estimateOf(ps, UDPReadsReference)
	seenReads = 0
	for _, p := range ps {
		seenReads += float64(p.events)
	}
	if got := est(e, seenReads); math.Abs(got/(0.8*truth)-1) > 1e-4 || e.RelError == nil || *e.RelError > 0.01 {
		t.Errorf("80 %% share: estimated %.0f of %.0f (±%s)", got, 0.8*truth, pctOf(e.RelError))
	}
	// One period whose counts could not be read: the whole estimate falls
	// back to the runs and edges rather than mixing the two.
	ps[2].counted, ps[2].ownRef = false, false
	if e := estimateOf(ps, UDPReadsReference); e.SampledEvents == uint64(seenReads) {
		t.Errorf("a period without counts still scaled the counts: %+v", e)
	}
}

// countedHooks is fakeHooks whose programs count: a share of their runs
// are the events the part's numbers are made of, and every run is one of
// the reference's events (the namespace's UDP reads).
type countedHooks struct {
	*fakeHooks
	share float64
}

func (c *countedHooks) HookGroups() []*probes.HookGroup {
	c.group.Counts = func() (probes.GroupCounts, error) {
		runs := c.runsNow()
		return probes.GroupCounts{Events: uint64(c.share * runs), InReference: uint64(runs)}, nil
	}
	return []*probes.HookGroup{c.group}
}

// wallCounter is a reference that counts rate events per second of wall
// time, always, and how often it was read.
type wallCounter struct {
	mu    sync.Mutex
	since time.Time
	rate  float64
	reads int
}

func (w *wallCounter) Packets() (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	return uint64(w.rate * time.Since(w.since).Seconds()), nil
}
func (w *wallCounter) Close() error { return nil }

// Through the governor: a socket group whose programs count the reads of
// its port and of the whole namespace is scaled by the namespace's UDP
// reads with the share it counted, not by its runs, and the reference is
// read at the period boundaries only — its edges are not needed.
func TestGovernorScalesByWhatTheProgramsCounted(t *testing.T) {
	const rate, share = 2e5, 0.75
	sock := &countedHooks{fakeHooks: newFakeHooks(udpsock.Group, probes.PerPacket, rate, 1, 100*time.Nanosecond), share: share}
	part := &hooksPart{hooks: []*fakeHooks{sock.fakeHooks}}
	reads := &wallCounter{since: time.Now(), rate: rate}
	src := fakeSources(50 * time.Nanosecond)
	src.UDPReads = func() (PacketCounter, error) { return reads, nil }
	s, err := Open(src, &countedPart{hooksPart: part, counted: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.Measure(context.Background(), Window{Duration: 1500 * time.Millisecond,
		Budget: Budget{CPUShare: 0.015, Period: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e := part.cov.Estimate(udpsock.Group)
	if e == nil || e.Reference != UDPReadsReference || e.Windows < 5 {
		t.Fatalf("estimate %+v", e)
	}
	// What the port read over the window: its share of the reference's
	// steady rate (the fake's first and last readings are microseconds
	// from the window's).
	seen := share * (part.last[0] - part.first[0])
	truth := share * rate * run.Duration().Seconds()
	t.Logf("%s; %.0f of %.0f; the reference read %d times over %d periods", e, e.Scale*seen, truth, reads.reads, e.Windows)
	// The counts are whole numbers of a fake's fractional runs: 0.1 %.
	if got := e.Scale * seen; math.Abs(got/truth-1) > 0.01 || e.RelError == nil || *e.RelError > 0.01 {
		t.Errorf("estimated %.0f reads of %.0f (±%s)", got, truth, pctOf(e.RelError))
	}
	// Periods and the window's two ends, never both sides of a switch.
	if periods := int(run.Duration()/(100*time.Millisecond)) + 4; reads.reads > periods+2 {
		t.Errorf("the reference was read %d times in %d periods: at the switches too", reads.reads, periods)
	}
}

// countedPart is hooksPart holding a countedHooks, whose group counts.
type countedPart struct {
	*hooksPart
	counted *countedHooks
}

func (p *countedPart) Probes() []probes.Probe { return []probes.Probe{p.counted} }

// A run of known length plans its periods so that every sampled group
// has boundWindows windows and the last period ends with the run: 4 s,
// 5 s and the default 10 s alike, where the stretched 2 s period gave a
// 4–5 s run two or three. When switching would take the process past its
// share of the budget the periods stay longer (the sections then say how
// long a run would bound them); without a length they are as before.
func TestGovernorPlansWindowsFromTheRunLength(t *testing.T) {
	const s = 1e9
	for _, c := range []struct {
		name     string
		length   time.Duration
		switchNs float64
		// want: at least this many windows (periods).
		want int
	}{
		{"4s", 4 * time.Second, 0.3e6, boundWindows},
		{"5s", 5 * time.Second, 0.3e6, boundWindows},
		{"10s", 10 * time.Second, 0.3e6, boundWindows},
		{"120s", 120 * time.Second, 0.3e6, 60},
		// 12 ms a switch: 24 ms a period against the process's 7.5 ms a
		// second of each of 2 CPUs: periods of at least 1.6 s.
		{"4s, costly switching", 4 * time.Second, 12e6, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			gg := &governedGroup{hg: &probes.HookGroup{Name: "packets", Class: probes.PerPacket}, rate: rates(0.3*s, 0.3*s), switchNs: c.switchNs}
			g := &governor{budget: Budget{CPUShare: 0.015}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{gg},
				length: c.length, began: time.Unix(1000, 0)}
			start, end := g.began, g.began.Add(c.length)
			n := 0
			for start.Before(end) && n < 1000 {
				g.periodStart = start
				duty, period := g.plan()
				if c.switchNs > 1e6 && period < g.runSwitchingPeriod() {
					t.Errorf("period %v shorter than switching allows (%v)", period, g.runSwitchingPeriod())
				}
				gg.periods = append(gg.periods, samplePeriod{length: period, on: time.Duration(duty * float64(period))})
				start = start.Add(period)
				n++
			}
			t.Logf("%d periods, the longest %v", n, maxPeriod(gg.periods))
			if n < c.want || !start.Equal(end) {
				t.Errorf("%d periods ending %v after the run, want at least %d ending with it", n, start.Sub(end), c.want)
			}
		})
	}
	// Without a length: the default period.
	gg := &governedGroup{hg: &probes.HookGroup{Name: "packets", Class: probes.PerPacket}, rate: rates(0.3*s, 0.3*s), switchNs: 0.3e6}
	g := &governor{budget: Budget{CPUShare: 0.015}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{gg}, began: time.Unix(1000, 0)}
	g.periodStart = g.began
	if _, period := g.plan(); period != DefaultBudgetPeriod {
		t.Errorf("period %v without a run length, want %v", period, DefaultBudgetPeriod)
	}
}

func maxPeriod(ps []samplePeriod) time.Duration {
	var m time.Duration
	for _, p := range ps {
		m = max(m, p.length)
	}
	return m
}

// A bound wider than ±10 % says how long a run would bring it there: the
// windows' spread shrinks as one over the root of their number, Student's
// t with it; a bound the share's shift alone makes wider has no length;
// one window says how long a run has a bound at all.
func TestEstimateSaysHowLongARunWouldBoundIt(t *testing.T) {
	sec := time.Second
	var ps []samplePeriod
	for i := range 5 {
		ps = append(ps, sp(sec, 50*time.Millisecond, uint64(1000+600*(i%2))))
	}
	e := estimateOf(ps, "")
	if e.RelError == nil || *e.RelError <= targetBound || e.DurationFor10PctNs <= int64(5*sec) || e.DurationFor10PctNs%int64(5*sec) != 0 {
		t.Fatalf("%+v (±%s)", e, pctOf(e.RelError))
	}
	// A run that long, the same traffic: within ±10 %.
	var long []samplePeriod
	for i := range int(e.DurationFor10PctNs / int64(sec)) {
		long = append(long, sp(sec, 50*time.Millisecond, uint64(1000+600*(i%2))))
	}
	if l := estimateOf(long, ""); l.RelError == nil || *l.RelError > targetBound || l.DurationFor10PctNs != 0 {
		t.Errorf("%v later: ±%s, still says %v", time.Duration(e.DurationFor10PctNs), pctOf(l.RelError), time.Duration(l.DurationFor10PctNs))
	}
	if !strings.Contains(e.String(), "; --duration "+evidence.DurationText(e.DurationFor10PctNs)+" would bound it to ±10 %") {
		t.Errorf("text %q", e)
	}
	if d := durationFor(5*sec, 5, 0.01, 0, 0.12); d != 0 {
		t.Errorf("a share's shift of 12 %% alone: %v", d)
	}
	one := estimateOf([]samplePeriod{sp(2*sec, 50*time.Millisecond, 1000)}, "")
	if one.RelError != nil || one.DurationFor10PctNs != int64(10*sec) || !strings.Contains(one.String(), "error unknown; --duration 10s would give it a bound") {
		t.Errorf("one window: %+v, %q", one, one)
	}
}

func pctOf(rel *float64) string {
	if rel == nil {
		return "?"
	}
	return strconv.FormatFloat(100**rel, 'f', 2, 64) + "%"
}
