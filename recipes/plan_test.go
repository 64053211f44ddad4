package recipes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/report"
)

// One code path: the udp-rx recipe, bound to the values `perfscope udp`
// passes, builds from the recorded loopback flood exactly the evidence the
// udp runner does (the golden file), and judges it with the same rules.
func TestUDPRecipeFromRecording(t *testing.T) {
	rec := replay.Load(t, netFixture)
	r, _ := Builtin("udp-rx")
	res, _ := runRecorded(t, r)
	if res.Net == nil || res.Softirq != nil || res.Locks != nil || res.Timeline != nil {
		t.Fatalf("sections: %+v", res)
	}
	b, err := json.MarshalIndent(res.Net.Evidence, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	replay.Golden(t, filepath.Join(netFixture, "evidence.golden.json"), append(b, '\n'))

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

// netFixture is measure's recording of `perfscope udp` over a loopback
// flood (measure.TestRecordNetFixture records it).
const netFixture = "../measure/testdata/net-lo-flood"

// runRecorded runs a network recipe (udp-rx's parameters) over the
// recorded loopback flood.
func runRecorded(t *testing.T, r *Recipe) (*Result, measure.Sources) {
	t.Helper()
	src, rec, root := replay.Sources(t, netFixture)
	p, err := r.Bind(map[string]string{"iface": rec.Iface.Name, "port": strconv.Itoa(rec.Port), "duration": "10ms",
		"profile": strconv.FormatBool(rec.CPUProfile != nil), "freq": strconv.Itoa(rec.Frequency)})
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's root holds /proc, not the interface's /sys: the
	// recorded interface stands in for what Prepare would resolve.
	p.iface, p.prepared = rec.Iface, true
	res, err := p.Run(context.Background(), src, Hooks{OnStart: func() { root.Flip(t) }})
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

// A result with a timeline carries the recipe's data, whatever its
// sections: the timeline is drawn next to them.
func TestTimelineResultReportsRecipeData(t *testing.T) {
	p := &Plan{Recipe: &Recipe{Name: "jvm-net"}, window: measure.Window{Duration: 3 * time.Second, Interval: time.Second}}
	net := &measure.NetResult{Evidence: evidence.NetEvidence{Port: 9000}}
	rep := (&Result{Plan: p, Sections: measure.Sections{Run: measure.Run{End: time.Now()}, Net: net, Timeline: &evidence.Timeline{Port: 9000}}}).Report("recipe", "test")
	if d, ok := rep.Data.(report.RecipeData); !ok || d.Timeline == nil || d.Net == nil {
		t.Fatalf("data %T %+v", rep.Data, rep.Data)
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

// A rule choice takes `enabled` as a part does: jvm-net judges the
// namespace's UDP receive-buffer drops only when given the JVM's UDP port,
// since without one they are some other program's.
func TestRuleChoiceEnabled(t *testing.T) {
	r, ok := Builtin("jvm-net")
	if !ok {
		t.Fatal("no built-in jvm-net")
	}
	all := []diagnose.Finding{{ID: "net.udp-rcvbuf", Severity: diagnose.Warn, Impact: 0.5}, {ID: "tcp.accept-overflow", Severity: diagnose.Warn, Impact: 0.5}}
	for _, c := range []struct {
		set  map[string]string
		want []string
	}{
		{map[string]string{"pid": "1", "tcp_port": "8080"}, []string{"tcp.accept-overflow"}},
		{map[string]string{"pid": "1", "tcp_port": "8080", "port": "9000"}, []string{"net.udp-rcvbuf", "tcp.accept-overflow"}},
	} {
		p, err := r.Bind(c.set)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(p.choose(all)); !slices.Equal(got, c.want) {
			t.Errorf("%v: chosen %v, want %v", c.set, got, c.want)
		}
	}
	bad := `version: 1
name: x
probes: [udpdrop]
rules:
  - {id: net.udp-rcvbuf, enabled: "${nope}"}
window: {duration: 1s}
`
	if _, err := Parse("x.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "rules[0].enabled: want true, false or a ${parameter}, got ${nope}") {
		t.Errorf("unknown parameter: %v", err)
	}
}

func filepathRead(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// A served recipe builds its profile part continuous; a one-shot run
// does not.
func TestServedProfileIsContinuous(t *testing.T) {
	r, ok := Builtin("cpu-profile")
	if !ok {
		t.Fatal("no built-in cpu-profile")
	}
	p, err := r.Bind(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := p.NewMeasurement(Hooks{}); m.Profile == nil || m.Profile.Options().Continuous {
		t.Errorf("one-shot measurement: profile part %+v, want one not continuous", m.Profile)
	}
	if m := p.NewMeasurement(Hooks{Continuous: true}); m.Profile == nil || !m.Profile.Options().Continuous {
		t.Errorf("continuous measurement: profile part %+v, want a continuous one", m.Profile)
	}
}
