package apply

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/diagnose"
)

// fakeNAPIs is the netdev family of a host whose NAPI instances are
// listed by id.
type fakeNAPIs struct {
	insts map[uint32]NAPIState
	sets  int
}

func (f *fakeNAPIs) Instance(id uint32) (NAPIState, bool, error) {
	st, ok := f.insts[id]
	if !ok {
		return NAPIState{}, false, nil
	}
	st.Settings = maps.Clone(st.Settings)
	return st, true, nil
}

func (f *fakeNAPIs) Set(id uint32, p map[string]uint64) error {
	st, ok := f.insts[id]
	if !ok {
		return errors.New("no such NAPI instance")
	}
	f.sets++
	for k, v := range p {
		v := v
		st.Settings[k] = &v
	}
	return nil
}

func u64p(v uint64) *uint64 { return &v }

// napiHost is fakeSystem with two NAPI instances of the run's interface
// (8193 serving rx-0, 8194 rx-1) at the kernel's defaults.
func napiHost(t *testing.T) (*System, *fakeNAPIs) {
	sys := fakeSystem(t)
	n := &fakeNAPIs{insts: map[uint32]NAPIState{}}
	for i, id := range []uint32{8193, 8194} {
		n.insts[id] = NAPIState{Iface: hostile, RXQueues: []int{i}, QueuesKnown: true,
			Settings: map[string]*uint64{"defer-hard-irqs": u64p(0), "gro-flush-timeout": u64p(0), "irq-suspend-timeout": u64p(0)}}
	}
	sys.NAPI = n
	return sys, n
}

func napiFinding() []diagnose.Finding {
	zero := map[string]uint64{"defer-hard-irqs": 0, "gro-flush-timeout": 0}
	set := map[string]uint64{"defer-hard-irqs": 2, "gro-flush-timeout": 200000}
	q := 0
	f := diagnose.Finding{ID: "net.napi-defer-irqs", Title: "defer", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting}}
	f.Recommendation.AddChanges(diagnose.NAPISettingsChange(hostile, &q, 8193, zero, set))
	return []diagnose.Finding{f}
}

func applyNAPI(t *testing.T, sys *System, dir string) (ApplyResult, error) {
	t.Helper()
	p, err := NewPlan(napiFinding(), []string{"net.napi-defer-irqs"})
	if err != nil {
		t.Fatal(err)
	}
	return Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
}

func napiValue(n *fakeNAPIs, id uint32, name string) uint64 { return *n.insts[id].Settings[name] }

// One NAPI instance's settings are written through napi-set, recorded in
// the revert file by id, interface and queue, and restored; the other
// instance of the device is left alone.
func TestApplyRevertNAPIInstance(t *testing.T) {
	sys, n := napiHost(t)
	res, err := applyNAPI(t, sys, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 1 || napiValue(n, 8193, "defer-hard-irqs") != 2 || napiValue(n, 8193, "gro-flush-timeout") != 200000 {
		t.Fatalf("applied %+v; NAPI 8193 defer %d flush %d", res.Applied, napiValue(n, 8193, "defer-hard-irqs"), napiValue(n, 8193, "gro-flush-timeout"))
	}
	if napiValue(n, 8194, "defer-hard-irqs") != 0 || napiValue(n, 8193, "irq-suspend-timeout") != 0 {
		t.Error("a setting or instance the change does not name was written")
	}
	rf, err := ReadRevertFile(res.RevertFile)
	if err != nil {
		t.Fatal(err)
	}
	c := rf.Changes[0].Change
	if c.Kind != diagnose.ChangeNAPI || c.NAPIID != 8193 || c.Iface != hostile || c.Queue == nil || *c.Queue != 0 || c.Old != "defer-hard-irqs=0 gro-flush-timeout=0" {
		t.Fatalf("revert entry %+v", c)
	}
	if !slices.Contains(rf.Shell, `ynl --family netdev --do napi-set --json '{"id": 8193, "defer-hard-irqs": 0, "gro-flush-timeout": 0}'   # NAPI instance of 'v$(>pwned)' rx-0`) {
		t.Errorf("shell rendition %q", rf.Shell)
	}
	rev, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil || len(rev.Restored) != 1 {
		t.Fatalf("revert: %+v %v", rev, err)
	}
	if napiValue(n, 8193, "defer-hard-irqs") != 0 || napiValue(n, 8193, "gro-flush-timeout") != 0 {
		t.Error("NAPI 8193 not restored")
	}
	again, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil || len(again.AlreadyOld) != 1 {
		t.Fatalf("second revert: %+v %v", again, err)
	}
}

// A NAPI id that vanished, moved to another device or to another queue
// of it (the device was reconfigured) is refused before anything
// changes, in one sentence that says so; so is a kernel without
// per-instance settings.
func TestApplyNAPIRefusesStaleIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*fakeNAPIs)
		want string
	}{
		{"vanished", func(n *fakeNAPIs) { delete(n.insts, 8193) }, "NAPI instance 8193 of 'v$(>pwned)' no longer exists (NAPI ids change when a device is reconfigured)"},
		{"another device", func(n *fakeNAPIs) { st := n.insts[8193]; st.Iface = "eth1"; n.insts[8193] = st }, "NAPI instance 8193 now belongs to eth1, not 'v$(>pwned)'"},
		{"another queue", func(n *fakeNAPIs) { st := n.insts[8193]; st.RXQueues = []int{5}; n.insts[8193] = st }, "now serves RX queues [5], not rx-0"},
		{"no per-instance settings", func(n *fakeNAPIs) {
			for id, st := range n.insts {
				st.Settings = map[string]*uint64{}
				n.insts[id] = st
			}
		}, "napi-set needs Linux 6.13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, n := napiHost(t)
			tc.edit(n)
			dir := t.TempDir()
			res, err := applyNAPI(t, sys, dir)
			var refused *RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), "nothing was changed") {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
			if n.sets != 0 || res.RevertFile != "" {
				t.Errorf("%d napi-set calls, revert file %q", n.sets, res.RevertFile)
			}
		})
	}
	// Without queue → NAPI ids from the driver, the queue cannot be
	// checked and the id's device is enough.
	sys, n := napiHost(t)
	st := n.insts[8193]
	st.RXQueues, st.QueuesKnown = nil, false
	n.insts[8193] = st
	if _, err := applyNAPI(t, sys, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// A NAPI instance that vanished after --apply (the device was reset) is
// reported gone by the revert, with why, and the rest is restored.
func TestRevertNAPIInstanceGone(t *testing.T) {
	sys, n := napiHost(t)
	res, err := applyNAPI(t, sys, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	delete(n.insts, 8193)
	sets := n.sets
	rev, err := Revert(context.Background(), res.RevertFile, sys, testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Gone) != 1 || !strings.Contains(rev.Gone[0].Note, "NAPI instance 8193 of 'v$(>pwned)' no longer exists") || n.sets != sets {
		t.Fatalf("revert %+v, %d writes", rev, n.sets-sets)
	}
}
