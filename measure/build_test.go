package measure_test

import (
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/spec"
)

// use is a part with its options at their defaults (the kind's zero
// where there is none), as a recipe that names none binds it, and set.
func use(p *spec.Part, set map[string]any) measure.PartUse {
	opts := map[string]any{}
	for _, o := range p.Options {
		v := o.Default
		if v == nil {
			switch o.Kind {
			case spec.KindInt, spec.KindPort, spec.KindPID, spec.KindSize:
				v = int64(0)
			case spec.KindBool:
				v = false
			case spec.KindDuration:
				v = time.Duration(0)
			case spec.KindCPUs:
				v = cpuset.Set{}
			case spec.KindFloat:
				v = float64(0)
			default:
				v = ""
			}
		}
		opts[o.Name] = v
	}
	for k, v := range set {
		opts[k] = v
	}
	return measure.PartUse{Part: p, Opts: opts}
}

// A run is built from the parts it uses, each by its own constructor: a
// network part makes it a network run, whose softirq, lock and profile
// parts are the network run's, and whose sockets are the counters' port
// and pid before any probe's.
func TestNewPartsBuildsWhatIsUsed(t *testing.T) {
	b := measure.Build{Window: 10 * time.Second}
	ps := measure.NewParts(b, []measure.PartUse{use(&softirq.Spec, nil), use(&lockstat.Spec, nil), use(&cpuprofile.Spec, nil)})
	if ps.Net != nil || ps.Softirq == nil || ps.Locks == nil || ps.Profile == nil || ps.OffCPU != nil || ps.Pauses != nil {
		t.Fatalf("no network part: got %+v", ps)
	}
	if got := len(ps.List()); got != 3 {
		t.Errorf("%d parts to open, want 3", got)
	}

	net := measure.NewParts(b, []measure.PartUse{
		use(&softirq.Spec, nil), use(&lockstat.Spec, nil),
		use(&udpdrop.Spec, map[string]any{"port": int64(5300)}),
		use(&udpsock.Spec, map[string]any{"port": int64(5300), "pid": int64(42)}),
		use(&measure.NetCountersSpec, map[string]any{"port": int64(53)}),
	})
	n := net.Net
	if n == nil || n.Softirq != net.Softirq || n.Locks != net.Locks || n.Part(udpdrop.Spec.Name) == nil || n.Part(udpsock.Spec.Name) == nil || n.Counters == nil {
		t.Fatalf("network run: got %+v", n)
	}
	if n.Queues != nil || n.Part(measure.TCPSpec.Name) != nil || n.Profile != nil {
		t.Errorf("parts the run does not use were built: queues %v tcp %v profile %v", n.Queues, n.Part(measure.TCPSpec.Name), n.Profile)
	}
	if o := net.NetOptions; o.Port != 53 || o.PID != 42 {
		t.Errorf("sockets of port %d pid %d, want the counters' port 53 and the first probe's pid 42", o.Port, o.PID)
	}
	// softirq, lockstat, udpdrop, udpsock and the counters.
	if got := len(net.List()); got != 5 {
		t.Errorf("%d parts to open, want 5", got)
	}
}
