package ethtool

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/internal/netnstest"
	"github.com/perfscope/perfscope/internal/testutil"
)

func TestRecordedRingsAndCoalesce(t *testing.T) {
	for _, c := range []struct {
		dir, iface string
		rings      Rings
		coalesce   Coalesce
		perPacket  bool
	}{
		// Captured on this project's VM (ethtool 6.1: "n/a" for unsupported).
		{"virtio_net611", "eth0", Rings{RXMax: 256, TXMax: 256, RX: 256, TX: 256}, Coalesce{RXFrames: 1, TXFrames: 1}, true},
		// ethtool 4.x layout (0 for unsupported); ixgbe's rx-usecs 1 is its
		// dynamic interrupt moderation, not one interrupt per packet.
		{"ixgbe", "ens1f0", Rings{RXMax: 4096, TXMax: 4096, RX: 512, TX: 512}, Coalesce{RXUsecs: 1}, false},
		{"mlx5_core", "ens5f0np0", Rings{RXMax: 8192, TXMax: 8192, RX: 1024, TX: 1024}, Coalesce{RXUsecs: 8, RXFrames: 128, TXUsecs: 8, TXFrames: 128, AdaptiveRX: true, AdaptiveTX: true}, false},
	} {
		src := Recorded{Dir: filepath.Join("testdata", c.dir)}
		r, err := src.Rings(c.iface)
		if err != nil || r != c.rings {
			t.Errorf("%s rings = %+v, %v; want %+v", c.dir, r, err, c.rings)
		}
		co, err := src.Coalesce(c.iface)
		if err != nil || co != c.coalesce || co.PerPacketInterrupts() != c.perPacket {
			t.Errorf("%s coalesce = %+v, %v; want %+v", c.dir, co, err, c.coalesce)
		}
	}
	if _, err := (Recorded{Dir: "testdata/veth"}).Rings("vb"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("veth rings: %v", err)
	}
}

func TestMissedCounters(t *testing.T) {
	for dir, want := range map[string]uint64{"ixgbe/ens1f0": 1832, "mlx5_core/ens5f0np0": 7} {
		iface := filepath.Base(dir)
		stats, err := Recorded{Dir: filepath.Join("testdata", filepath.Dir(dir))}.Stats(iface)
		if err != nil {
			t.Fatal(err)
		}
		if n, names := Missed(stats); n != want || len(names) == 0 {
			t.Errorf("%s: missed %d (%v), want %d", dir, n, names, want)
		}
	}
	stats, _ := Recorded{Dir: "testdata/virtio_net611"}.Stats("eth0")
	if n, names := Missed(stats); n != 0 || names != nil {
		t.Errorf("virtio_net has no missed counter, got %d %v", n, names)
	}
}

// The live ioctls against ethtool's own output, on every interface of this
// host that answers `ethtool -g`, and veth (which does not) in a namespace.
func TestIoctlRingsLive(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Fatal("ethtool not installed (scripts/deps.sh)")
	}
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		out, err := exec.Command("ethtool", "-g", e.Name()).Output()
		if err != nil {
			continue
		}
		want, err := ParseRings(strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		got, err := Ioctl{}.Rings(e.Name())
		if err != nil || got != want {
			t.Errorf("%s: ioctl rings %+v, %v; ethtool %+v", e.Name(), got, err, want)
		}
		if out, err := exec.Command("ethtool", "-c", e.Name()).Output(); err == nil {
			wantC, _ := ParseCoalesce(strings.NewReader(string(out)))
			if gotC, err := (Ioctl{}).Coalesce(e.Name()); err != nil || gotC != wantC {
				t.Errorf("%s: ioctl coalesce %+v, %v; ethtool %+v", e.Name(), gotC, err, wantC)
			}
		}
	}
	p := netnstest.NewVethPair(t, 1)
	netnstest.In(t, p.NSB, func() {
		if _, err := (Ioctl{}).Rings(p.B); !errors.Is(err, ErrNotSupported) {
			t.Errorf("veth rings: %v, want not supported", err)
		}
	})
}
