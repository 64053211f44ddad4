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
