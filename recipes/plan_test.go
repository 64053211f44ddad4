package recipes

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// One code path: the udp-rx recipe, bound to the values `perfscope udp`
// passes, builds from the recorded loopback flood exactly the evidence the
// udp runner does (the golden file), and judges it with the same rules.
func TestUDPRecipeFromRecording(t *testing.T) {
	rec := loadRecording(t, netFixture)
	r, _ := Builtin("udp-rx")
	res, _ := runRecorded(t, r)
	if res.Net == nil || res.Softirq != nil || res.Locks != nil || res.Timeline != nil {
		t.Fatalf("sections: %+v", res)
	}
	b, err := json.MarshalIndent(res.Net.Evidence, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join(netFixture, "evidence.golden.json"), append(b, '\n'))

	want := diagnose.DiagnoseNet(diagnose.NetInput{Evidence: res.Net.Evidence, Config: res.Net.Config})
	if len(res.Findings) != len(want) {
		t.Errorf("findings %v, the net rules find %v", ids(res.Findings), ids(want))
	}
	rep := res.Report("udp", "test")
	if _, ok := rep.Data.(report.NetData); !ok || rep.Command != "udp" || rep.Recipe == nil || rep.Recipe.Name != "udp-rx" ||
		rep.Recipe.Parameters["port"] != strconv.Itoa(rec.Port) || rep.Meta.DurationNs != res.Net.Evidence.DurationNs {
		t.Errorf("report %s %T %+v", rep.Command, rep.Data, rep.Recipe)
	}
	// --flame: the recipe's six outputs, with the udp command's titles.
	dir := t.TempDir()
	p2, _ := r.Bind(map[string]string{"iface": rec.Iface.Name, "flame": dir, "profile": "true"})
	res.Plan.outputs = p2.outputs
	if err := res.WriteOutputs(rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Artifacts) != 6 || rep.Artifacts[0].Kind != "folded" || rep.Artifacts[1].Path != filepath.Join(dir, "udp-netrx.svg") {
		t.Fatalf("artifacts %+v", rep.Artifacts)
	}
	svg, _ := filepathRead(filepath.Join(dir, "udp-netrx.svg"))
	if !strings.Contains(svg, "perfscope udp --iface lo: CPUs running NET_RX (") {
		t.Error("the NET_RX graph's title is not the udp command's")
	}
}

// runRecorded runs a network recipe (udp-rx's parameters) over the
// recorded loopback flood.
func runRecorded(t *testing.T, r *Recipe) (*Result, Sources) {
	t.Helper()
	src, rec, root := recordedSources(t, netFixture)
	p, err := r.Bind(map[string]string{"iface": rec.Iface.Name, "port": strconv.Itoa(rec.Port), "duration": "10ms",
		"profile": strconv.FormatBool(rec.CPUProfile != nil), "freq": strconv.Itoa(rec.Frequency)})
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's root holds /proc, not the interface's /sys: the
	// recorded interface stands in for what Prepare would resolve.
	p.iface, p.prepared = rec.Iface, true
	res, err := p.Run(context.Background(), src, Hooks{OnStart: func() { root.flip(t) }})
	if err != nil {
		t.Fatal(err)
	}
	return res, src
}

func ids(fs []diagnose.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

// The timeline joins every part's intervals by tick, and the pause rule
// reads the joined rows.
func TestTimelineJoinsParts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	u := func(v uint64) *uint64 { return &v }
	i := func(v int64) *int64 { return &v }
	soft := evidence.SoftirqEvidence{Intervals: []evidence.SoftirqInterval{
		{End: at(1), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 1, BusiestShare: 0.03},
		{End: at(2), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 1, BusiestShare: 0.03},
		{End: at(3), NetRXPerS: 10000, NetRXShare: 0.02, BusiestCPU: 0, BusiestShare: 0.03},
	}}
	net := evidence.NetEvidence{Softirq: soft, Port: 9000}
	net.Sockets.Sockets = []evidence.UDPSocket{{Port: 9000, Inode: 7, WakeupsByCPU: map[int]uint64{1: 90, 0: 10}}}
	net.Drops.Intervals = []evidence.DropInterval{{End: at(1)}, {End: at(2), Count: 1400}, {End: at(3)}}
	net.Sockets.Intervals = []evidence.SocketInterval{
		{End: at(1), Datagrams: u(10000), QueueBytes: u(0)},
		{End: at(2), Datagrams: u(8600), QueueBytes: u(131072)},
		{End: at(3), Datagrams: u(10000), QueueBytes: u(0)},
	}
	pauses := evidence.JVMPauses{PID: 4242, Intervals: []evidence.JVMPauseInterval{
		{End: at(1), Safepoints: i(0), SafepointTimeNs: i(0)},
		{End: at(2), OldGCs: 1, GCTimeNs: 300e6, Safepoints: i(1), SafepointTimeNs: i(301e6)},
		{End: at(3), Safepoints: i(0), SafepointTimeNs: i(0)},
	}}
	p := &Plan{Recipe: &Recipe{Name: "jvm-net"}, window: Window{Duration: 3 * time.Second, Interval: time.Second}}
	m := &Measurement{plan: p, softirq: &Softirq{netRX: []map[int]float64{{1: 0.04}, {1: 0.05}, {1: 0.04}}},
		net: &netParts{drops: &Drops{}}, netOpts: NetOptions{Port: 9000}}
	r := &Result{Net: &NetResult{Evidence: net}, JVMPauses: &pauses}
	tl := m.timeline(r, Run{Begin: t0})
	if tl == nil || len(tl.Rows) != 3 || tl.Port != 9000 || tl.PID != 4242 || tl.DropSource != "probe" || len(tl.FeedingCPUs) != 1 || tl.FeedingCPUs[0] != 1 {
		t.Fatalf("timeline %+v", tl)
	}
	row := tl.Rows[1]
	if *row.Drops != 1400 || *row.DropsPerS != 1400 || *row.DatagramsPerS != 8600 || *row.SocketQueueBytes != 131072 ||
		*row.JVMStoppedNs != 301e6 || *row.JVMGCs != 1 || *row.FeedingNetRXShare != 0.05 || row.DurationNs != int64(time.Second) {
		t.Errorf("paused row %+v", row)
	}
	fs := diagnose.Run(diagnose.TimelineRules, *tl)
	if len(fs) != 1 || fs[0].Title != "drops on UDP port 9000 rose to 1.4k/s in the interval the JVM (pid 4242) was stopped for 301ms" {
		t.Errorf("findings %+v", fs)
	}
	var text bytes.Buffer
	rep := (&Result{Plan: p, Run: Run{Begin: t0, End: at(3)}, Net: r.Net, JVMPauses: &pauses, Timeline: tl, Findings: fs}).Report("recipe", "test")
	if _, ok := rep.Data.(report.RecipeData); !ok {
		t.Fatalf("data %T", rep.Data)
	}
	if err := report.Render(&text, rep, report.Text); err != nil || !strings.Contains(text.String(), "Timeline (port 9000, JVM pid 4242)") ||
		!strings.Contains(text.String(), "JVM stopped") || strings.Count(text.String(), "Findings") != 1 {
		t.Errorf("text (%v):\n%s", err, text.String())
	}
	// One part with a timeline: its section's intervals say it all.
	if tl := m.timeline(&Result{Net: &NetResult{Evidence: evidence.NetEvidence{Softirq: soft}}}, Run{Begin: t0}); tl != nil {
		t.Errorf("a timeline of one part: %+v", tl)
	}
}

// A recipe's rule choices: by ID over family, severity overrides and
// impact floors; every finding when the recipe chooses none.
func TestChooseFindings(t *testing.T) {
	all := []diagnose.Finding{
		{ID: "net.udp-rcvbuf", Severity: diagnose.Warn, Impact: 0.5},
		{ID: "net.xps-unset", Severity: diagnose.Info, Impact: 0.001},
		{ID: "locks.contended", Severity: diagnose.Warn, Impact: 0.2},
	}
	p := &Plan{Recipe: &Recipe{}}
	if got := p.choose(all); len(got) != 3 {
		t.Errorf("no choice: %v", ids(got))
	}
	p = &Plan{Recipe: &Recipe{RulesGiven: true}, rules: []boundRule{
		{RuleChoice: RuleChoice{Family: "net", MinImpact: 0.01}},
		{RuleChoice: RuleChoice{ID: "net.udp-rcvbuf", Severity: diagnose.Crit}},
	}}
	got := p.choose(all)
	if len(got) != 1 || got[0].ID != "net.udp-rcvbuf" || got[0].Severity != diagnose.Crit {
		t.Errorf("chosen %+v", got)
	}
}

func filepathRead(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
