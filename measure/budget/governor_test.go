package budget

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/spec"
)

// specReferences is the references the probes' specs declare, as
// measure's catalog gives them to a session's governor.
func specReferences(group string) spec.Reference {
	for _, p := range []*spec.Part{&udpsock.Spec, &softirq.Spec, &netqueue.Spec} {
		if r, ok := p.References[group]; ok {
			return r
		}
	}
	return spec.RefPackets
}

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

func (f *fakeHooks) Method() probes.AttachMethod { return probes.MethodBTF }

func (f *fakeHooks) Costs() []probes.ProgramCost { return nil }

func (f *fakeHooks) Missing() map[string]error { return nil }

func (f *fakeHooks) Close() error { return nil }

func (f *fakeHooks) runsNow() float64 {
	c, _ := f.SelfCosts()
	return float64(probes.Total(c[f.group.Hooks[0]]).Runs)
}

// window is one window a governor governed, as measureWindow drove it.
type window struct {
	// first and last are each hook's runs at the window's two readings.
	first, last []float64
	length      time.Duration
	cov         *Coverage
}

// measureWindow drives g over one window of d the way measure's session
// does: the references read, the hooks' first readings, the governor
// started, the window waited out, the governor finished, the last
// readings, the references closed, the coverage taken.
func measureWindow(t *testing.T, g *Governor, b Budget, d time.Duration, hooks ...*fakeHooks) window {
	t.Helper()
	g.SetWindow(b, d)
	if err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	var w window
	g.OpenRefs()
	for _, h := range hooks {
		w.first = append(w.first, h.runsNow())
	}
	begin := time.Now()
	g.Start(begin)
	time.Sleep(d)
	g.Finish()
	for _, h := range hooks {
		w.last = append(w.last, h.runsNow())
	}
	g.CloseRefs(time.Now())
	w.length = time.Since(begin)
	_, w.cov = g.Use()
	return w
}

// newFakeGovernor is a session's governor over fake hooks, the
// tracepoints' entry costing entry a run.
func newFakeGovernor(t *testing.T, b Budget, entry time.Duration, hooks ...probes.Probe) *Governor {
	t.Helper()
	g := NewGovernor(b, hooks, entry)
	if g == nil {
		t.Fatal("no hook group to govern")
	}
	return g
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
	b := Budget{CPUShare: 0.015, Period: 100 * time.Millisecond}
	g := newFakeGovernor(t, b, 50*time.Nanosecond, packets, batches)
	part := measureWindow(t, g, b, 1500*time.Millisecond, packets, batches)
	u, _ := g.Use()
	if u == nil || len(u.Groups) != 2 {
		t.Fatalf("budget use %+v", u)
	}
	// The busiest CPU's share: the per-packet runs on CPU 1 at their
	// 100 ns and the 50 ns entry (the batch group's on CPU 0 are 1e-4).
	share := (part.last[0] - part.first[0]) * float64(150*time.Nanosecond) / float64(part.length)
	t.Logf("CPU 1: %.3f %%", 100*share)
	// A few periods of EWMA warm-up are allowed over the budget: half
	// again is a failure of the governor, not of the scheduler.
	if share > 1.5*0.015 {
		t.Errorf("busiest CPU took %.2f %%, budget 1.5 %%", 100*share)
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
	truth := packets.rate * part.length.Seconds()
	if got := seen * e.Scale; math.Abs(got-truth)/truth > 0.03 {
		t.Errorf("estimated %.0f runs, %.0f happened (seen %.0f)", got, truth, seen)
	}
	if got, want := batches.rate*part.length.Seconds(), part.last[1]-part.first[1]; math.Abs(got-want) > 2 {
		t.Errorf("batch group counted %.0f of %.0f", want, got)
	}
	// A later exact window attaches everything again (the session's
	// governor, asked for no budget).
	if err := g.AttachAll(); err != nil {
		t.Fatal(err)
	}
	if !packets.IsAttached() {
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
	g := &Governor{budget: Budget{CPUShare: 0.02, Period: time.Second}, cpus: 2, fixRate: rates(0, 0)}
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
	g := &Governor{budget: Budget{CPUShare: 0.02}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{pkts, sock}}
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
	if _, period := g.plan(); period != DefaultPeriod {
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
	g := &Governor{budget: Budget{CPUShare: 0.02}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{pkts},
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
	b := Budget{CPUShare: budget, Period: 100 * time.Millisecond}
	g := newFakeGovernor(t, b, entry, packets, batches)
	step := time.AfterFunc(time.Second, func() { packets.setRate(2e6) })
	defer step.Stop()
	part := measureWindow(t, g, b, 2500*time.Millisecond, packets, batches)
	var pg *governedGroup
	for _, gg := range g.groups {
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

// The guard: a sampled group attached for the whole period (planned from
// a quiet one) is detached as soon as its cost in the period passes its
// allowance, long before the period ends.
func TestGovernorGuardEndsAWindowOverItsAllowance(t *testing.T) {
	flood := newFakeHooks("fake/packets", probes.PerPacket, 2e6, 1, 100*time.Nanosecond)
	g := NewGovernor(Budget{CPUShare: 0.02}, []probes.Probe{flood}, 50*time.Nanosecond)
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
	mk := func() *Governor {
		return &Governor{groups: []*governedGroup{
			{hg: &probes.HookGroup{Name: udpsock.Group, Class: probes.PerPacket}},
			{hg: &probes.HookGroup{Name: "netqueue/packets", Class: probes.PerPacket}},
		}}
	}
	packets := func() (uint64, error) { return 100, nil }
	reads := func() (uint64, error) { return 7, nil }
	g := mk()
	g.SetReferences(packets, reads, nil, specReferences)
	if g.groups[0].ref.name != UDPReadsReference || g.groups[0].ref.count() != 7 ||
		g.groups[1].ref.name != PacketsReference || g.groups[1].ref.count() != 100 || len(g.refs) != 2 {
		t.Errorf("references: sockets %+v, queues %+v", g.groups[0].ref, g.groups[1].ref)
	}
	g = mk()
	g.SetReferences(packets, nil, nil, specReferences)
	if g.groups[0].ref.name != PacketsReference || g.groups[1].ref.name != PacketsReference {
		t.Errorf("without UDP reads: sockets %+v, queues %+v", g.groups[0].ref, g.groups[1].ref)
	}
	g = mk()
	g.SetReferences(nil, nil, nil, specReferences)
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
	reads := &wallCounter{since: time.Now(), rate: rate}
	b := Budget{CPUShare: 0.015, Period: 100 * time.Millisecond}
	g := newFakeGovernor(t, b, 50*time.Nanosecond, sock)
	g.SetReferences(nil, reads.Packets, nil, specReferences)
	part := measureWindow(t, g, b, 1500*time.Millisecond, sock.fakeHooks)
	e := part.cov.Estimate(udpsock.Group)
	if e == nil || e.Reference != UDPReadsReference || e.Windows < 5 {
		t.Fatalf("estimate %+v", e)
	}
	// What the port read over the window: its share of the reference's
	// steady rate (the fake's first and last readings are microseconds
	// from the window's).
	seen := share * (part.last[0] - part.first[0])
	truth := share * rate * part.length.Seconds()
	t.Logf("%s; %.0f of %.0f; the reference read %d times over %d periods", e, e.Scale*seen, truth, reads.reads, e.Windows)
	// The counts are whole numbers of a fake's fractional runs: 0.1 %.
	if got := e.Scale * seen; math.Abs(got/truth-1) > 0.01 || e.RelError == nil || *e.RelError > 0.01 {
		t.Errorf("estimated %.0f reads of %.0f (±%s)", got, truth, pctOf(e.RelError))
	}
	// Periods and the window's two ends, never both sides of a switch.
	if periods := int(part.length/(100*time.Millisecond)) + 4; reads.reads > periods+2 {
		t.Errorf("the reference was read %d times in %d periods: at the switches too", reads.reads, periods)
	}
}

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
			g := &Governor{budget: Budget{CPUShare: 0.015}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{gg},
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
	g := &Governor{budget: Budget{CPUShare: 0.015}, cpus: 2, fixRate: rates(0, 0), groups: []*governedGroup{gg}, began: time.Unix(1000, 0)}
	g.periodStart = g.began
	if _, period := g.plan(); period != DefaultPeriod {
		t.Errorf("period %v without a run length, want %v", period, DefaultPeriod)
	}
}

func maxPeriod(ps []samplePeriod) time.Duration {
	var m time.Duration
	for _, p := range ps {
		m = max(m, p.length)
	}
	return m
}

// A rare group (TCP retransmits and resets, reported per connection as
// exact) is never demoted, however the batch groups beside it are: a
// new-connection load costs the exact groups more than their share, and
// the budget samples softirq and lockstat while tcpevents stays attached.
func TestGovernorNeverSamplesRare(t *testing.T) {
	mk := func(name string, class probes.Class, prio int, r []float64) *governedGroup {
		return &governedGroup{hg: &probes.HookGroup{Name: name, Class: class}, priority: prio, rate: r}
	}
	const s = 1e9
	g := &Governor{budget: Budget{CPUShare: 0.015, Period: time.Second}, cpus: 2, fixRate: rates(0, 0)}
	soft := mk("softirq", probes.Batch, 2, rates(0.004*s, 0.004*s))
	lock := mk("lockstat", probes.Batch, 1, rates(0.002*s, 0.002*s))
	tcp := mk("tcpevents", probes.Rare, 0, rates(0.004*s, 0.001*s))
	g.groups = []*governedGroup{soft, lock, tcp}
	g.plan()
	if tcp.sampled() {
		t.Fatal("the rare tcpevents group was demoted to sampling windows")
	}
	// 0.8 % of CPU 0 for softirq, 0.4 % for tcpevents: over half of
	// 1.5 % together, so softirq is sampled; lockstat fits back in.
	if !soft.demoted || lock.demoted {
		t.Errorf("softirq demoted %v (want true), lockstat %v (want false)", soft.demoted, lock.demoted)
	}
	if got := probes.Rare.String(); got != "rare" {
		t.Errorf("class %q", got)
	}
}
