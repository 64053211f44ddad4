package netlab

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

func TestLabBuildsAndLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	ctx := context.Background()
	l, err := New(ctx, Config{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Run(ctx, l.ReceiverNS, "ethtool", "-S", l.ReceiverIf)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	if !strings.Contains(out, "rx_queue_3_xdp_packets") {
		t.Errorf("receiver has no 4th queue:\n%s", out)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ns, _ := Namespaces()
	if slices.Contains(ns, l.SenderNS) || slices.Contains(ns, l.ReceiverNS) {
		t.Errorf("namespaces left behind: %v", ns)
	}
}

// An interrupted lab says where it stopped, how many of its scenarios
// finished out of those it was to run, and which did not run.
func TestInterruptedSentence(t *testing.T) {
	stop := &Interrupted{During: "gro-on", NotRun: []string{"gro-on", "rps-off"}}
	want := "lab udp interrupted during gro-on, whose namespaces were removed; 3 of 5 scenarios finished, not run: gro-on, rps-off"
	if got := stop.Sentence("lab udp", 3); got != want {
		t.Errorf("Sentence = %q, want %q", got, want)
	}
}
