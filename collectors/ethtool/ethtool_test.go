package ethtool

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func u(v uint64) *uint64 { return &v }

func val(p *uint64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatUint(*p, 10)
}

// TestPerQueueDrivers runs the naming table over one recorded `ethtool -S`
// per driver.
func TestPerQueueDrivers(t *testing.T) {
	tests := []struct {
		dir, iface, driver string
		rxQueues, txQueues int
		// one spot check: direction, queue, packets, bytes, drops ("nil" = absent)
		dir0                  Direction
		queue                 int
		packets, bytes, drops string
	}{
		{"ixgbe", "ens1f0", "ixgbe", 20, 20, RX, 16, "4", "328", "nil"},
		{"i40e", "eth2", "i40e", 4, 4, RX, 1, "1500", "192000", "nil"},
		{"mlx5_core", "ens5f0np0", "mlx5_core", 3, 3, TX, 0, "2000", "200000", "3"},
		{"virtio_net", "ens3", "virtio_net", 2, 2, RX, 1, "79001", "8876543", "0"},
		{"virtio_net611", "eth0", "virtio_net", 1, 0, RX, 0, "nil", "nil", "0"},
		{"veth", "vb", "veth", 4, 0, RX, 0, "2", "152", "0"},
		{"ena", "eth0", "ena", 2, 2, RX, 1, "8800", "1180000", "nil"},
		{"bnxt_en", "eth5", "bnxt_en", 2, 2, RX, 1, "5015", "651300", "4"},
	}
	for _, tt := range tests {
		src := Recorded{Dir: "testdata/" + tt.dir}
		info, err := src.DriverInfo(tt.iface)
		if err != nil || info.Driver != tt.driver {
			t.Errorf("%s: driver %q %v", tt.dir, info.Driver, err)
		}
		stats, err := src.Stats(tt.iface)
		if err != nil {
			t.Errorf("%s: %v", tt.dir, err)
			continue
		}
		qs := PerQueue(stats)
		var rx, tx int
		for _, q := range qs {
			if q.Dir == RX {
				rx++
			} else {
				tx++
			}
		}
		if rx != tt.rxQueues || tx != tt.txQueues {
			t.Errorf("%s: %d rx %d tx queues, want %d/%d", tt.dir, rx, tx, tt.rxQueues, tt.txQueues)
		}
		found := false
		for _, q := range qs {
			if q.Dir == tt.dir0 && q.Queue == tt.queue {
				found = true
				if val(q.Packets) != tt.packets || val(q.Bytes) != tt.bytes || val(q.Drops) != tt.drops {
					t.Errorf("%s %s-%d: packets %s bytes %s drops %s, want %s %s %s", tt.dir, q.Dir, q.Queue,
						val(q.Packets), val(q.Bytes), val(q.Drops), tt.packets, tt.bytes, tt.drops)
				}
			}
		}
		if !found {
			t.Errorf("%s: queue %s-%d missing", tt.dir, tt.dir0, tt.queue)
		}
	}
}

func TestReferenceHostDeadQueues(t *testing.T) {
	stats, err := Recorded{Dir: "testdata/ixgbe"}.Stats("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	b := QueueBalance(PerQueue(stats), RX, 0)
	if b.Queues != 20 || !slices.Equal(b.Dead, []int{16, 17, 18, 19}) {
		t.Errorf("balance = %+v, want queues 16-19 dead", b)
	}
	if b.MaxQueue != 0 || b.Max != 198005155 || b.Skew < 1.5 || b.Skew > 1.7 {
		t.Errorf("max q%d %d skew %.2f", b.MaxQueue, b.Max, b.Skew)
	}
	// An even spread: no dead queue, skew 1.
	even := []QueueCounters{{Dir: RX, Queue: 0, Packets: u(100)}, {Dir: RX, Queue: 1, Packets: u(100)}, {Dir: TX, Queue: 0, Packets: u(1)}}
	if b := QueueBalance(even, RX, 0); len(b.Dead) != 0 || b.Skew != 1 {
		t.Errorf("even = %+v", b)
	}
	// No traffic at all: nothing is dead.
	idle := []QueueCounters{{Dir: RX, Queue: 0, Packets: u(0)}, {Dir: RX, Queue: 1, Packets: u(0)}}
	if b := QueueBalance(idle, RX, 0); len(b.Dead) != 0 || b.Skew != 0 {
		t.Errorf("idle = %+v", b)
	}
}

func TestSubQueuesAndStats(t *testing.T) {
	prev := PerQueue([]Stat{{"rx_queue_0_packets", 100}, {"rx_queue_1_packets", 50}, {"rx_queue_1_bytes", 900}})
	cur := PerQueue([]Stat{{"rx_queue_0_packets", 160}, {"rx_queue_1_packets", 10}, {"rx_queue_1_bytes", 1000}, {"rx_queue_2_packets", 7}})
	d := SubQueues(cur, prev)
	if len(d) != 3 || *d[0].Packets != 60 || *d[1].Packets != 10 || *d[1].Bytes != 100 || *d[2].Packets != 7 || d[0].Bytes != nil {
		t.Errorf("delta = %+v", d)
	}
	s := SubStats([]Stat{{"a", 10}, {"b", 3}}, []Stat{{"a", 4}, {"b", 5}})
	if s[0].Value != 6 || s[1].Value != 3 {
		t.Errorf("stats delta = %+v", s)
	}
}

func TestChannelsFeaturesRSS(t *testing.T) {
	ixgbe := Recorded{Dir: "testdata/ixgbe"}
	ch, err := ixgbe.Channels("ens1f0")
	if err != nil || ch.Combined != 20 || ch.MaxCombined != 63 || ch.RXQueues() != 20 || ch.Other != 1 {
		t.Errorf("channels = %+v %v", ch, err)
	}
	rss, err := ixgbe.RSS("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Indirection) != 128 || rss.RXRings != 20 || len(rss.Key) != 40 || rss.HashFunction != "toeplitz" {
		t.Errorf("rss = %+v", rss)
	}
	if used := rss.QueuesUsed(); len(used) != 16 || used[15] != 15 {
		t.Errorf("queues used = %v, want 0-15 (Makita's talk)", used)
	}
	b, _ := json.Marshal(rss)
	var back RSS
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.Key, rss.Key) || !strings.Contains(string(b), `"key":"6d:5a:56:da`) {
		t.Errorf("rss JSON %s: %v", b, err)
	}

	feat, err := ixgbe.Features("ens1f0")
	if err != nil {
		t.Fatal(err)
	}
	if gro := feat.Active(FeatureGRO); gro == nil || !*gro {
		t.Errorf("GRO = %v", gro)
	}
	if lro, ok := feat.Lookup(FeatureLRO); !ok || lro.Active || lro.Fixed {
		t.Errorf("LRO = %+v", lro)
	}
	if feat.Active(FeatureUDPGROForwarding) != nil {
		t.Error("an old kernel without rx-udp-gro-forwarding must report it absent")
	}

	veth := Recorded{Dir: "testdata/veth"}
	vf, err := veth.Features("vb")
	if err != nil {
		t.Fatal(err)
	}
	if f := vf.Active(FeatureUDPGROForwarding); f == nil || !*f {
		t.Errorf("veth rx-udp-gro-forwarding = %v", f)
	}
	if f, ok := vf.Lookup(FeatureGROHW); !ok || !f.Fixed || f.Active {
		t.Errorf("rx-gro-hw = %+v", f)
	}
	if _, err := veth.RSS("vb"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("veth RSS err = %v, want ErrNotSupported", err)
	}
	if ch, err := veth.Channels("vb"); err != nil || ch.RX != 4 || ch.Combined != 0 || ch.RXQueues() != 4 {
		t.Errorf("veth channels %+v %v", ch, err)
	}
	if _, err := (Recorded{Dir: "testdata/virtio_net611"}).RSS("eth0"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("virtio RSS err = %v", err)
	}
	if _, err := (Recorded{Dir: "testdata/ena"}).Features("eth0"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("missing recording err = %v", err)
	}
	if _, err := veth.Stats("nope"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("unknown iface err = %v", err)
	}
}

func TestParsersRejectMalformed(t *testing.T) {
	if _, err := ParseStats(strings.NewReader("NIC statistics:\n     rx: x\n")); err == nil {
		t.Error("stats: non-numeric value accepted")
	}
	if _, err := ParseStats(strings.NewReader("no stats available\n")); !errors.Is(err, ErrNotSupported) {
		t.Errorf("lo stats err = %v", err)
	}
	if _, err := ParseChannels(strings.NewReader("Pre-set maximums:\nRX: 4\n")); err == nil {
		t.Error("channels without current settings accepted")
	}
	if _, err := ParseFeatures(strings.NewReader("rx-gro: maybe\n")); err == nil {
		t.Error("feature state accepted")
	}
	if _, err := ParseRSS(strings.NewReader("RX flow hash indirection table for x with 2 RX ring(s):\n    0: 0 z\n")); err == nil {
		t.Error("bad indirection entry accepted")
	}
	if _, err := ParseDriverInfo(strings.NewReader("version: 1\n")); err == nil {
		t.Error("driver info without driver accepted")
	}
	if _, err := parseHexKey("6d:zz"); err == nil {
		t.Error("bad key accepted")
	}
}
