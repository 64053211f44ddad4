package recipes

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm"
	"github.com/perfscope/perfscope/measure"
)

// A recipe's threshold overrides change what the rules find, for every
// family: on the recorded loopback flood the socket that drops 92 % of its
// datagrams is a finding by default and not once the drop share that
// makes a socket saturated is raised above it (by id); the receive-buffer
// drops are silenced by the family's rcvbuf_drop_share, and a lower lock
// threshold turns the saturated-socket finding into the plain contention
// one. The JVM and GC rules read theirs the same way.
func TestThresholdOverridesChangeFindings(t *testing.T) {
	udp, _ := Builtin("udp-rx")
	withRules := func(rules string) *Recipe {
		text := strings.Replace(string(udp.Text), "rules:\n  - family: net\n", "rules:\n"+rules, 1)
		r, err := Parse("my.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	finding := func(fs []diagnose.Finding, id string) *diagnose.Finding {
		for i := range fs {
			if fs[i].ID == id {
				return &fs[i]
			}
		}
		return nil
	}
	res, _ := runRecorded(t, udp)
	lock, rcvbuf := finding(res.Findings, "net.socket-lock-contention"), finding(res.Findings, "net.udp-rcvbuf")
	if lock == nil || rcvbuf == nil || !strings.HasPrefix(lock.Title, "one UDP socket is the bottleneck") {
		t.Fatalf("defaults: %v", ids(res.Findings))
	}
	for _, c := range []struct {
		name, rules string
		check       func(fs []diagnose.Finding) bool
	}{
		{"socket_drop_share by id", "  - id: net.socket-lock-contention\n    thresholds: {socket_drop_share: 0.95}\n  - family: net\n",
			func(fs []diagnose.Finding) bool {
				return finding(fs, "net.socket-lock-contention") == nil && finding(fs, "net.udp-rcvbuf") != nil
			}},
		{"rcvbuf_drop_share by family", "  - family: net\n    thresholds: {rcvbuf_drop_share: 0.95}\n",
			func(fs []diagnose.Finding) bool {
				return finding(fs, "net.udp-rcvbuf") == nil && finding(fs, "net.socket-lock-contention") != nil
			}},
		{"socket_lock_warn_share lowered", "  - family: net\n    thresholds: {socket_lock_warn_share: 0.001}\n",
			func(fs []diagnose.Finding) bool {
				f := finding(fs, "net.socket-lock-contention")
				return f != nil && strings.HasPrefix(f.Title, "2 CPUs contend on one UDP socket's lock")
			}},
		{"the id's value over the family's", "  - family: net\n    thresholds: {rcvbuf_drop_share: 0.95}\n  - id: net.udp-rcvbuf\n    thresholds: {rcvbuf_drop_share: 0.5}\n",
			func(fs []diagnose.Finding) bool { return finding(fs, "net.udp-rcvbuf") != nil }},
	} {
		p, err := withRules(c.rules).Bind(map[string]string{"iface": "lo"})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if fs := p.judge(res, measure.Sources{}); !c.check(fs) {
			t.Errorf("%s: findings %v", c.name, ids(fs))
		}
	}

	kib := func(n float64) *float64 { return &n }
	requests := int64(1000)
	jvmRes := &Result{JVM: &measure.JVMResult{Result: &jvm.Result{Evidence: evidence.JVM{BytesPerRequest: kib(150 << 10), Requests: &requests, RequestsSource: "user"}}}}
	gcRes := &Result{GC: &measure.GCResult{GC: evidence.GC{WindowSeconds: 100, Safepoints: &evidence.SafepointStats{NonGCNs: 2e9, NonGCMaxNs: 20e6}}}}
	for _, c := range []struct {
		recipe, family, tuned string
		set                   map[string]string
		res                   *Result
		id                    string
	}{
		{jvmRecipe, "jvm", "  - id: jvm.alloc-per-request\n    thresholds: {alloc_per_request_bytes: 200000}\n", nil, jvmRes, "jvm.alloc-per-request"},
		{gcRecipe, "gc", "  - family: gc\n    thresholds: {stopped_share: 0.05}\n", map[string]string{"log": "gc.log"}, gcRes, "gc.safepoint.non-gc-stops"},
	} {
		bind := func(rules string) *Plan {
			r, err := Parse("my.yaml", []byte(c.recipe+"rules:\n"+rules))
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Bind(c.set)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		def, tuned := bind("  - family: "+c.family+"\n").judge(c.res, measure.Sources{}), bind(c.tuned).judge(c.res, measure.Sources{})
		if finding(def, c.id) == nil || finding(tuned, c.id) != nil {
			t.Errorf("%s: default %v, overridden %v", c.id, ids(def), ids(tuned))
		}
	}
}

const jvmRecipe = `version: 1
name: my-jvm
collectors:
  - async-profiler: {pid: 42}
window: {duration: 1s}
`

const gcRecipe = `version: 1
name: my-gc
parameters:
  log: {type: files, required: true}
collectors:
  - gclog: {files: "${log}"}
window: {duration: 1s}
`
