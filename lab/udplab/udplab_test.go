package udplab

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report"
	"github.com/perfscope/perfscope/report/compare"
)

func TestScenariosAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scenarios {
		if seen[s.Name] {
			t.Errorf("scenario %s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Fault == "" || s.Step == "" || s.FixText == "" || s.Before.Mode == "" || s.Flood.Senders <= 0 {
			t.Errorf("%s: incomplete %+v", s.Name, s)
		}
		switch s.Fix {
		case FixNone:
			if s.Finding != "" {
				t.Errorf("%s: a reference scenario expects no finding", s.Name)
			}
		case FixServer:
			if s.After == s.Before || s.After.Mode == "" {
				t.Errorf("%s: a server fix must change the server", s.Name)
			}
		case FixApply:
			if s.After != (Server{}) {
				t.Errorf("%s: --apply fixes keep the server; After is set", s.Name)
			}
		case FixCheck:
			if s.Check == nil || s.Finding != "" {
				t.Errorf("%s: a check scenario has a Check and no finding", s.Name)
			}
		}
		if s.Fix != FixNone && s.Fix != FixCheck {
			// The finding must be one of the rules perfscope has.
			known := false
			for _, r := range diagnose.NetRules {
				known = known || r.ID == s.Finding
			}
			if !known {
				t.Errorf("%s: finding %q is no rule of diagnose.NetRules", s.Name, s.Finding)
			}
		}
	}
	// A scenario's extra rows must name a group the profile measures.
	for _, s := range Scenarios {
		for _, k := range s.Metrics {
			if g, ok := strings.CutPrefix(k, "profile.share."); ok && !slices.ContainsFunc(evidence.KernelGroups, func(kg evidence.KernelGroup) bool { return kg.Name == g }) {
				t.Errorf("%s: metric %s names no evidence.KernelGroups group", s.Name, k)
			}
		}
	}
	for _, name := range []string{"single-socket", "reuseport-no-steering", "rps-off", "xps-off", "gro-on", "netfilter-empty", "rp-filter", "rcvbuf-small", "legacy-iptables", "rps-idle-profile", "tuned"} {
		if _, ok := Lookup(name); !ok {
			t.Errorf("no scenario %s (the issue's list)", name)
		}
	}
	if !slices.Equal(Names()[:2], []string{"single-socket", "reuseport-no-steering"}) {
		t.Errorf("names %v: Makita's order", Names())
	}
}

func TestAppliedCommands(t *testing.T) {
	stderr := "revert file: /tmp/x/perfscope-revert-1.json (undo with: perfscope udp --revert /tmp/x/perfscope-revert-1.json)\n" +
		"applied [net.rp-filter]: sysctl -w net.ipv4.conf.all.rp_filter=0\n" +
		"applied [net.rp-filter]: sysctl -w net.ipv4.conf.all.accept_local=1\n"
	got := netlab.AppliedCommands(stderr)
	want := []string{"sysctl -w net.ipv4.conf.all.rp_filter=0", "sysctl -w net.ipv4.conf.all.accept_local=1"}
	if !slices.Equal(got, want) {
		t.Errorf("appliedCommands = %q, want %q", got, want)
	}
	if got := netlab.AppliedCommands("perfscope: --apply: \"net.x\" is not a finding of this run\n"); len(got) != 0 {
		t.Errorf("a refused --apply applied %q", got)
	}
}

func f64(v float64) *float64 { return &v }

func TestTextShowsFindingFixAndNumbers(t *testing.T) {
	sc, _ := Lookup("rp-filter")
	ch := 0.25
	res := Result{
		Scenario: sc.Describe(),
		Found:    &diagnose.Finding{ID: "net.rp-filter", Severity: diagnose.Info, Title: "reverse-path filtering (rp_filter=1) validates every packet's source: 1.9% of the NET_RX CPUs"},
		Applied:  []string{"sysctl -w net.ipv4.conf.all.rp_filter=0"},
		Gone:     true,
		Comparison: &compare.Comparison{Metrics: []compare.Metric{
			{Key: "packets_per_s", Label: "packets/s received", Unit: "packets/s", Before: f64(100000), After: f64(125000), Change: &ch},
			{Key: "profile.share.fib-validation", Label: "CPU share in fib-validation (NET_RX CPUs)", Unit: "fraction", Before: f64(0.019), After: f64(0.004)},
			{Key: "profile.share.slab", Label: "CPU share in slab (NET_RX CPUs)", Unit: "fraction", Before: f64(0.02), After: f64(0.02)},
		}},
	}
	tuned, _ := Lookup("tuned")
	results := compare.LabUDPData{res, {Scenario: tuned.Describe(), WarnOrWorse: []string{}}, {Scenario: sc.Describe(), Problem: "perfscope did not report net.rp-filter for the planted fault"}}
	var b bytes.Buffer
	compare.WriteLabUDPScenario(&b, res)
	if err := results.WriteText(&b, &report.Report{Meta: report.Meta{DurationNs: int64(95 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"found:   net.rp-filter (info): reverse-path filtering",
		"applied: sysctl -w net.ipv4.conf.all.rp_filter=0",
		"after:   net.rp-filter gone",
		"packets/s received", "+25%",
		"CPU share in fib-validation",
		"tuned", "no warn+",
		"2 of 3 scenarios proved their fix in 1m35s.",
		"rp-filter: perfscope did not report net.rp-filter",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Only the scenario's own function group, not every group.
	if strings.Contains(out, "CPU share in slab") {
		t.Errorf("output shows an unrelated group:\n%s", out)
	}
}

// The report's scenario is the JSON the scenario always wrote (its
// description fields), whatever moved between packages.
func TestDescribeKeepsTheJSON(t *testing.T) {
	for _, sc := range Scenarios {
		whole, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := json.Marshal(sc.Describe())
		if err != nil {
			t.Fatal(err)
		}
		if string(whole) != string(desc) {
			t.Errorf("%s: the scenario writes\n%s\nits report\n%s", sc.Name, whole, desc)
		}
	}
}

func TestFixKindRoundTrips(t *testing.T) {
	for _, sc := range Scenarios {
		b, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		var back Scenario
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Fix != sc.Fix || back.Name != sc.Name {
			t.Errorf("%s: fix %v came back as %v", sc.Name, sc.Fix, back.Fix)
		}
	}
}

// The idle-CPU check tells a busy CPU (the scenario's premise failed) from
// a profile that dropped the idle task's interrupt samples.
func TestIdleCheckSaysWhenTheCPUWasBusy(t *testing.T) {
	run := func(idleLoop, idleIRQ uint64) string {
		var r compare.Run
		r.Data.Profile.NetRXCPUs = []int{0}
		r.Data.Profile.CPUs = []evidence.ProfileCPU{{CPU: 0, Samples: 1491, IdleLoopSamples: idleLoop, IdleInterruptSamples: idleIRQ, NetRXSamples: 241, NetRXShare: 0.16}}
		_, problem := checkIdleNetRX(0, 0.05)(r)
		return problem
	}
	if p := run(1, 0); !strings.Contains(p, "CPU 0 was not idle (1 of 1492 ticks in the idle loop") {
		t.Errorf("busy CPU: %q", p)
	}
	if p := run(1200, 0); p != "no softirq-on-idle samples kept" {
		t.Errorf("idle CPU, no interrupt samples: %q", p)
	}
}
