package integration

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/measure/budget"
)

// observeBoundingSet is observeCaps — the README's observe run line, the
// set the container test runs with — as setpriv's bounding set: without
// CAP_SYS_ADMIN bpf_stats are refused, and the overhead must still be
// there, from the programs' own run counters.
func observeBoundingSet() string {
	s := "-all"
	for _, c := range observeCaps {
		s += ",+" + strings.ToLower(c)
	}
	return s
}

// Under the default budget, a bounded loopback flood into one socket with
// a small receive buffer, inside a namespace of the test's own (so the
// namespace's kernel counters are this flood's alone): the per-packet
// hooks are sampled, every estimate says so, and each lands on the exact
// number beside it — the datagrams read per socket on what the server
// itself read, the drops on the namespace's RcvbufErrors — within the
// bound it reports. Then the same under setpriv with the observe
// capabilities and no CAP_SYS_ADMIN. Under the budget bpf_stats stay off
// either way, and the overhead (per-CPU cost, per-run times, the budget's
// use) comes from the programs' own counters and timing.
func TestBudgetEstimatesAgreeWithKernel(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop CAP_SYS_ADMIN: %v", err)
	}
	lab, err := netlab.New(context.Background(), netlab.Config{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	for _, c := range []struct {
		name   string
		prefix []string
	}{
		{"root", nil},
		{"no CAP_SYS_ADMIN", []string{"setpriv", "--bounding-set=" + observeBoundingSet(), "--inh-caps=-all"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := runLoopbackFlood(t, lab, c.prefix)
			ov := rep.Overhead
			checkBudget(t, ov, budget.Default, 0.06)

			// Reads: the socket probe's estimate against the server's count.
			s := rep.Data.Sockets
			if len(s.Sockets) != 1 || s.Sockets[0].ReceivedPkt == nil {
				t.Fatalf("sockets %+v (%s)", s.Sockets, s.ReceivedUnavailable)
			}
			got := float64(*s.Sockets[0].ReceivedPkt)
			t.Logf("reads: %.0f (%v, row ±%s), server read %.0f", got, s.Estimate, pctOf(s.Sockets[0].ReceivedRelError), rep.serverRead)
			if s.Estimate != nil {
				checkWithin(t, "datagrams read", got, rep.serverRead, s.Sockets[0].ReceivedRelError)
			}

			// Drops: the port's count against the namespace's RcvbufErrors.
			n, _ := rep.Data.Drops.OnPort(labPort)
			dropped := float64(n)
			snmp := rep.Data.Drops.UDPSNMP
			if snmp == nil || snmp.UDP.RcvbufErrors < 1000 {
				t.Fatalf("a flood into a 4 KiB buffer dropped too little to judge: %+v", snmp)
			}
			t.Logf("drops: %.0f (%v), RcvbufErrors %d", dropped, rep.Data.Drops.Estimate, snmp.UDP.RcvbufErrors)
			// The port is the namespace's only drop, so the estimate,
			// scaled by the namespace's packets, lands within 0.01 % of
			// RcvbufErrors on a quiet machine whatever its (wide) bound.
			// 3 %: the probe's windows and the SNMP counter are read at
			// different instants of a flood still running, and a loaded
			// machine stretches that (CI once saw 2.3 % apart).
			const tol = 0.03
			if math.Abs(dropped/float64(snmp.UDP.RcvbufErrors)-1) > tol {
				t.Errorf("port %d dropped %.0f, the namespace's RcvbufErrors say %d: more than %.1f %% apart", labPort, dropped, snmp.UDP.RcvbufErrors, 100*tol)
			}
			// A finding over estimates says which.
			for _, f := range rep.Findings {
				if f.ID == "net.udp-rcvbuf" {
					return
				}
			}
			t.Errorf("no net.udp-rcvbuf finding under the budget: %+v", rep.Findings)
		})
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// A flood into one port of a namespace where nothing else reads UDP: the
// sampled socket reads are that port's share of the namespace's exact
// UDP read count (Udp InDatagrams), and the probe counts both itself, so
// the share is exactly 1 in every window and the estimate is the kernel's
// own count, with a bound of about 0 — not, as when it scaled the probe's
// runs (every socket read and wakeup on the machine), off by several per
// cent inside a bound of several more.
func TestBudgetSoleReaderReadsAreExact(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	lab, err := netlab.New(context.Background(), netlab.Config{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	bin := Perfscope(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := fmt.Sprintf("127.0.0.1:%d", labPort)
	srv := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-server", "--listen", target, "--mode", "single",
		"--threads", "1", "--for", "20s", "--progress", "50ms")
	var srvErr lockedBuffer
	srv.Stderr = &srvErr
	if err := lab.Start(srv); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Cancel(); srv.Wait() }()
	for i := 0; i < 100 && !strings.Contains(srvErr.String(), "listening"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	flood := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-flood", "--target", target, "--senders", "2",
		"--duration", "12s", "--max-packets", "50000000")
	if err := lab.Start(flood); err != nil {
		t.Fatal(err)
	}
	defer func() { flood.Cancel(); flood.Wait() }()
	time.Sleep(300 * time.Millisecond)
	rep := measureServer(t, ctx, lab, []string{bin, "udp", "--iface", "lo", "--port", fmt.Sprint(labPort),
		"--duration", "5s", "--no-profile", "-o", "json"}, &srvErr)

	s := rep.Data.Sockets
	if len(s.Sockets) != 1 || s.Sockets[0].ReceivedPkt == nil || s.Estimate == nil {
		t.Fatalf("sockets %+v (%s), estimate %v", s.Sockets, s.ReceivedUnavailable, s.Estimate)
	}
	snmp := rep.Data.Drops.UDPSNMP
	if snmp == nil || snmp.UDP.InDatagrams < 10000 {
		t.Fatalf("the namespace read too little to judge: %+v", snmp)
	}
	got, kernel := float64(*s.Sockets[0].ReceivedPkt), float64(snmp.UDP.InDatagrams+snmp.UDP6.InDatagrams)
	t.Logf("reads %.0f (%v, row ±%s); the namespace's InDatagrams %.0f, the server's own count %.0f",
		got, s.Estimate, pctOf(s.Sockets[0].ReceivedRelError), kernel, rep.serverRead)
	if s.Estimate.Reference != budget.UDPReadsReference || s.Estimate.RelError == nil || *s.Estimate.RelError > 0.002 {
		t.Errorf("the sole reader's reads scaled by %q ±%s, want the namespace's UDP reads ±0", s.Estimate.Reference, pctOf(s.Estimate.RelError))
	}
	if row := s.Sockets[0].ReceivedRelError; row == nil || *row > 0.002 {
		t.Errorf("the socket's row bound ±%s: it is every read counted, no split", pctOf(row))
	}
	// The estimate spans the budget's own InDatagrams readings, the
	// report's InDatagrams the counters part's, taken after the sampling
	// parts' Begin and End (the budget reads just before the first Begin
	// and just after the last sampling part's End): two readings of a
	// counter moving
	// at the flood's ~60,000 datagrams a second, 0.5 % apart is 25 ms
	// between them, which one descheduling of perfscope on the flood's two
	// saturated vCPUs exceeds (CI: 0.504 %). 1 % is 50 ms.
	if diff := math.Abs(got/kernel - 1); diff > 0.01 {
		t.Errorf("reads %.0f, the kernel counted %.0f: %.2f %% apart", got, kernel, 100*diff)
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// checkBudget checks a run's overhead under a budget of share (the
// default, budget.Default, unless the run asked for another): the budget's use and the cost per CPU are there, something was
// sampled, each sampled group with an estimate of at least two windows,
// and the cost model's own figure for the busiest CPU is under maxShare
// (generously bounded: not a timing).
func checkBudget(t *testing.T, ov evidence.Overhead, share, maxShare float64) {
	t.Helper()
	if ov.Budget == nil || ov.Budget.CPUShare != share || ov.CPUCost == nil || ov.CPUCost.Runs == 0 {
		t.Fatalf("overhead without the budget's use (%v of a CPU) or the cost per CPU: %+v", share, ov)
	}
	t.Logf("cost: busiest CPU %d %.2f %% (budget %.1f %%), all CPUs %.2f %%, process %.2f %%, total %.2f %%; bpf_stats: %q",
		ov.CPUCost.MaxCPU, 100*ov.CPUCost.MaxShare, 100*share, 100*ov.CPUCost.Share, 100*ov.ProcessCPUShare, 100*ov.Budget.TotalShare, ov.StatsOff)
	if ov.StatsOff == "" || ov.StatsSample != nil {
		t.Errorf("bpf_stats under the budget: off %q, sample %+v", ov.StatsOff, ov.StatsSample)
	}
	for _, p := range ov.Programs {
		if p.RunCount > 0 && (p.PerRunFrom != "self-timed" || p.PerRunNs <= 0) {
			t.Errorf("%s: %d runs, per run %.0f ns from %q, want the program's own timing", p.Program, p.RunCount, p.PerRunNs, p.PerRunFrom)
		}
	}
	if want := ov.CPUCost.MaxShare + ov.ProcessCPUShare; math.Abs(ov.Budget.TotalShare-want) > 1e-12 || ov.ProcessCPUShare <= 0 {
		t.Errorf("total share %v, want the busiest CPU's programs and the process's share, %v", ov.Budget.TotalShare, want)
	}
	// The process's CPU while governed is what the budget took off the
	// programs; switching sampled groups is part of it.
	if ov.Budget.ProcessShare <= 0 || ov.Budget.ProcessShare > ov.ProcessCPUShare+1e-9 || ov.Budget.SwitchNs <= 0 || ov.Budget.PeriodNs != int64(time.Second) {
		t.Errorf("budget: process %.3f %% while governed (%.3f %% over the window), switching %d ns, period %d ns",
			100*ov.Budget.ProcessShare, 100*ov.ProcessCPUShare, ov.Budget.SwitchNs, ov.Budget.PeriodNs)
	}
	sampled := 0
	for _, g := range ov.Budget.Groups {
		t.Logf("  %s (%s): exact %v, %v", g.Group, g.Class, g.Exact, g.Estimate)
		if !g.Exact {
			sampled++
			if g.Estimate == nil || g.Estimate.Windows < 2 {
				t.Errorf("group %s sampled without an estimate of at least two windows: %+v", g.Group, g.Estimate)
			}
		}
	}
	if sampled == 0 {
		t.Errorf("a flood under a %.1f %% budget sampled no hook group", 100*share)
	}
	if ov.CPUCost.MaxShare > maxShare {
		t.Errorf("busiest CPU %.2f %% under a %.1f %% budget", 100*ov.CPUCost.MaxShare, 100*share)
	}
}

// checkWithin fails when got is further from want than one and a half
// times its reported 95 % bound (a 95 % bound is missed once in twenty
// runs by design; at 1.5× about once in a thousand, for a test that must
// not flake), with 3 points for the window's two ends (the server's count
// is interpolated between its progress lines) — or with no bound at all.
func checkWithin(t *testing.T, what string, got, want float64, rel *float64) {
	t.Helper()
	if rel == nil {
		t.Errorf("%s: estimated %.0f without a bound", what, got)
		return
	}
	// 1.5× the bound (a 95 % bound misses once in twenty), plus 6 %: the
	// windows' hooks slow the flooded port more than the other service's
	// paced reads, which moves the port's share of the namespace's reads
	// inside the windows. The bound takes that in only as far as the
	// namespace's reads slowed (shareBias); CI once saw 4.5 % against a
	// 0.7 % bound.
	if diff := math.Abs(got/want - 1); diff > 1.5**rel+0.06 {
		t.Errorf("%s: estimated %.0f ±%.1f %%, exact %.0f: %.1f %% apart", what, got, 100**rel, want, 100*diff)
	}
}

func pctOf(rel *float64) string {
	if rel == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f%%", 100**rel)
}

// runLoopbackFlood floods 127.0.0.1 inside the lab's receiver namespace
// into one socket read by one thread through a 4 KiB buffer, beside a
// paced 20 000 datagrams/s into another port, and runs
// `perfscope udp --iface lo` there with the default budget, its command
// line after prefix.
func runLoopbackFlood(t *testing.T, lab *netlab.Lab, prefix []string) udpReport {
	t.Helper()
	bin := Perfscope(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := fmt.Sprintf("127.0.0.1:%d", labPort)
	srv := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-server", "--listen", target, "--mode", "single",
		"--threads", "1", "--rcvbuf", "4096", "--for", "20s", "--progress", "50ms")
	var srvErr lockedBuffer
	srv.Stderr = &srvErr
	if err := lab.Start(srv); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Cancel(); srv.Wait() }()
	for i := 0; i < 100 && !strings.Contains(srvErr.String(), "listening"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	flood := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-flood", "--target", target, "--senders", "2",
		"--duration", "12s", "--max-packets", "50000000")
	if err := lab.Start(flood); err != nil {
		t.Fatal(err)
	}
	defer func() { flood.Cancel(); flood.Wait() }()
	// Another service's traffic in the namespace, paced, on the next
	// port: the sampled reads follow every UDP read of the namespace, so
	// the port's share of them is what the windows must estimate.
	other := fmt.Sprintf("127.0.0.1:%d", labPort+1)
	otherSrv := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-server", "--listen", other, "--mode", "single",
		"--threads", "1", "--for", "20s")
	otherFlood := lab.Command(ctx, lab.ReceiverNS, bin, "lab", "udp-flood", "--target", other, "--senders", "1",
		"--rate", "20000", "--duration", "12s", "--max-packets", "1000000")
	for _, c := range []*exec.Cmd{otherSrv, otherFlood} {
		if err := lab.Start(c); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Cancel(); c.Wait() }()
		time.Sleep(200 * time.Millisecond) // the server listens before the flood starts
	}
	time.Sleep(300 * time.Millisecond)

	args := append(append([]string{}, prefix...), bin, "udp", "--iface", "lo", "--port", fmt.Sprint(labPort),
		"--duration", "8s", "--no-profile", "-o", "json")
	return measureServer(t, ctx, lab, args, &srvErr)
}
