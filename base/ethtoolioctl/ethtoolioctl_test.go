package ethtoolioctl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
)

func TestCallRefusesNamesTheKernelCannotHold(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("x", unix.IFNAMSIZ)} {
		if err := Call(name, Request(unix.ETHTOOL_GDRVINFO, 196)); !errors.Is(err, ErrNoDevice) {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestLoopback asks this kernel about lo: its feature names (the string
// set apply/ looks a feature's bit up in), a missing device, and a
// request lo does not implement.
func TestLoopback(t *testing.T) {
	testutil.RequireRoot(t)
	names, err := StringSet("lo", SetFeatures)
	if err != nil || !slices.Contains(names, "rx-gro") {
		t.Fatalf("features of lo: %v %v", names, err)
	}
	if err := Call("perfscope-none", Request(unix.ETHTOOL_GDRVINFO, 196)); !errors.Is(err, ErrNoDevice) {
		t.Errorf("missing device: %v", err)
	}
	if err := Call("lo", Request(unix.ETHTOOL_GRXFHINDIR, 8)); !errors.Is(err, ErrNotSupported) {
		t.Errorf("RSS table of lo: %v", err)
	}
}
