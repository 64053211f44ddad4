package measure

import (
	"errors"
	"fmt"
	"testing"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// The driver's per-queue statistics over the window: each queue's growth,
// a queue that appeared mid-window left out, a counter that went back (a
// driver reset) left out; and why there are none, in words.
func TestQStatsDelta(t *testing.T) {
	q := func(typ netlinkq.QueueType, id int, c map[string]uint64) netlinkq.QueueStats {
		return netlinkq.QueueStats{Ifindex: 4, Type: typ, ID: id, Counters: c}
	}
	first := []netlinkq.QueueStats{
		q(netlinkq.RX, 0, map[string]uint64{"rx-packets": 1000, "rx-alloc-fail": 2}),
		q(netlinkq.RX, 1, map[string]uint64{"rx-packets": 500, "rx-alloc-fail": 9}),
		q(netlinkq.TX, 0, map[string]uint64{"tx-packets": 70}),
	}
	last := []netlinkq.QueueStats{
		q(netlinkq.RX, 0, map[string]uint64{"rx-packets": 4000, "rx-alloc-fail": 5}),
		q(netlinkq.RX, 1, map[string]uint64{"rx-packets": 900, "rx-alloc-fail": 1}),
		q(netlinkq.RX, 2, map[string]uint64{"rx-packets": 10}),
		q(netlinkq.TX, 0, map[string]uint64{"tx-packets": 100}),
	}
	got, why := QStatsDelta(first, nil, last, nil)
	if want := "[{rx 0 map[rx-alloc-fail:3 rx-packets:3000]} {rx 1 map[rx-packets:400]} {tx 0 map[tx-packets:30]}]"; fmt.Sprint(got) != want || why != "" {
		t.Errorf("got %v (%q)\nwant %s", got, why, want)
	}
	for _, c := range []struct {
		firstErr, lastErr error
		last              []netlinkq.QueueStats
		want              string
	}{
		{fmt.Errorf("netdev command 12: %w", netlinkq.ErrUnavailable), nil, last, "this kernel has no per-queue statistics over netlink (qstats-get, Linux 6.10+)"},
		{fmt.Errorf("qstats: %w", probes.ErrNotSupported), nil, last, "this kernel has no per-queue statistics over netlink (qstats-get, Linux 6.10+)"},
		{nil, errors.New("boom"), last, "qstats-get at the end of the window: boom"},
		{nil, nil, nil, "the driver reports no per-queue statistics (qstats-get lists none)"},
	} {
		if got, why := QStatsDelta(first, c.firstErr, c.last, c.lastErr); got != nil || why != c.want {
			t.Errorf("%v/%v: %v %q, want %q", c.firstErr, c.lastErr, got, why, c.want)
		}
	}
}

// Ring overruns counted in qstats stand for the NIC's missed packets only
// where ethtool names none.
func TestMissedFromQStats(t *testing.T) {
	s := evidence.QueueSection{QStats: []evidence.QueueStats{
		{Type: "rx", Queue: 0, Counters: map[string]uint64{"rx-hw-drop-overruns": 7}},
		{Type: "rx", Queue: 1, Counters: map[string]uint64{"rx-hw-drop-overruns": 5}},
	}}
	MissedFromQStats(&s)
	if s.NICMissed == nil || *s.NICMissed != 12 || fmt.Sprint(s.NICMissedCounters) != "[qstats rx-hw-drop-overruns]" {
		t.Errorf("missed %v %v", s.NICMissed, s.NICMissedCounters)
	}
	ethtoolMissed := uint64(3)
	s = evidence.QueueSection{NICMissed: &ethtoolMissed, NICMissedCounters: []string{"rx_missed_errors"}, QStats: s.QStats}
	MissedFromQStats(&s)
	if *s.NICMissed != 3 {
		t.Errorf("ethtool's count replaced: %d", *s.NICMissed)
	}
	s = evidence.QueueSection{}
	if MissedFromQStats(&s); s.NICMissed != nil {
		t.Errorf("no qstats, yet missed %d", *s.NICMissed)
	}
}
