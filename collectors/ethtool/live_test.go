package ethtool

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/internal/netnstest"
	"github.com/perfscope/perfscope/internal/testutil"
)

// TestIoctlLiveVeth reads a 4-queue veth the test creates, through the
// same ioctls as ethtool, and checks them against ethtool's own output.
func TestIoctlLiveVeth(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	p := netnstest.NewVethPair(t, 4)
	// Traffic A → B so that B's per-queue counters move.
	netnstest.SendUDP(t, p.NSA, "10.199.0.2:9", 20)

	var (
		info  DriverInfo
		stats []Stat
		ch    Channels
		feat  Features
		rssEr error
		errs  []error
	)
	netnstest.In(t, p.NSB, func() {
		var err error
		info, err = Ioctl{}.DriverInfo(p.B)
		errs = append(errs, err)
		stats, err = Ioctl{}.Stats(p.B)
		errs = append(errs, err)
		ch, err = Ioctl{}.Channels(p.B)
		errs = append(errs, err)
		feat, err = Ioctl{}.Features(p.B)
		errs = append(errs, err)
		_, rssEr = Ioctl{}.RSS(p.B)
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if info.Driver != "veth" {
		t.Errorf("driver = %q", info.Driver)
	}
	if ch.RX != 4 || ch.TX != 4 {
		t.Errorf("channels = %+v", ch)
	}
	for _, name := range []string{FeatureGRO, FeatureUDPGROForwarding} {
		if f := feat.Active(name); f == nil || !*f {
			t.Errorf("%s = %v, the rig turned it on", name, f)
		}
	}
	if !errors.Is(rssEr, ErrNotSupported) {
		t.Errorf("veth RSS err = %v, want ErrNotSupported", rssEr)
	}

	// ethtool -S printed right after must list the same names, and values
	// at least as large (counters only grow).
	text := netnstest.Run(t, "ip", "netns", "exec", p.NSB, "ethtool", "-S", p.B)
	recorded, err := ParseStats(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != len(stats) {
		t.Fatalf("ioctl %d stats, ethtool %d", len(stats), len(recorded))
	}
	var total uint64
	for i := range stats {
		if stats[i].Name != recorded[i].Name || stats[i].Value > recorded[i].Value {
			t.Errorf("stat %d: ioctl %+v ethtool %+v", i, stats[i], recorded[i])
		}
	}
	for _, q := range PerQueue(stats) {
		if q.Dir == RX && q.Packets != nil {
			total += *q.Packets
		}
	}
	if total < 20 {
		t.Errorf("per-queue RX packets = %d after 20 datagrams", total)
	}
}

func TestIoctlLoopbackAndUnknown(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := (Ioctl{}).Stats("lo"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("lo stats err = %v, want ErrNotSupported", err)
	}
	feat, err := Ioctl{}.Features("lo")
	if err != nil || len(feat) < 10 {
		t.Errorf("lo features: %d %v", len(feat), err)
	}
	name := fmt.Sprintf("nx%d", 12345)
	if _, err := (Ioctl{}).Channels(name); !errors.Is(err, ErrNoDevice) {
		t.Errorf("unknown iface err = %v", err)
	}
	if _, err := (Ioctl{}).DriverInfo(strings.Repeat("x", 20)); !errors.Is(err, ErrNoDevice) {
		t.Errorf("overlong name err = %v", err)
	}
}
