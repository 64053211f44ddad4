package netlinkq

import (
	"fmt"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// napi-set's threaded attribute (Linux 6.17+) on one NAPI instance of a
// threaded veth in a namespace of the test's own: napi-get reads that
// instance unthreaded (no kernel thread) and its sibling still threaded;
// setting it back gives it a thread again.
func TestLiveSetNAPIThreaded(t *testing.T) {
	testutil.RequireRoot(t)
	name, ifindex := threadedVeth(t, "psnapithr")
	off, on := uint32(0), uint32(1)
	var before, during, after []NAPI
	err := testutil.InNetns(name, func() (err error) {
		if before, err = NAPIs(ifindex); err != nil {
			return err
		}
		if len(before) != 2 || before[0].Threaded != "enabled" {
			return fmt.Errorf("vb's NAPI instances %s, want 2 threaded", napiText(before))
		}
		if err := SetNAPI(before[0].ID, NAPISettings{Threaded: &off}); err != nil {
			return err
		}
		if during, err = NAPIs(ifindex); err != nil {
			return err
		}
		if err := SetNAPI(before[0].ID, NAPISettings{Threaded: &on}); err != nil {
			return err
		}
		after, err = NAPIs(ifindex)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before %s; during %s; after %s", napiText(before), napiText(during), napiText(after))
	if during[0].Threaded != "disabled" || during[0].PID != 0 || during[1].Threaded != "enabled" || during[1].PID == 0 {
		t.Errorf("after napi-set threaded 0 on %d: %s", before[0].ID, napiText(during))
	}
	if after[0].Threaded != "enabled" || after[0].PID == 0 {
		t.Errorf("after napi-set threaded 1 on %d: %s", before[0].ID, napiText(after))
	}
}
