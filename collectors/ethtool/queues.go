package ethtool

import (
	"regexp"
	"sort"
	"strconv"
)

// Direction of a queue.
type Direction string

const (
	RX Direction = "rx"
	TX Direction = "tx"
)

// QueueCounters are one queue's counters from the driver's statistics. A
// nil counter is one the driver does not report per queue (veth counts no
// TX packets, virtio_net ≥ 6.11 moved packets to netlink queue stats).
type QueueCounters struct {
	Dir     Direction `json:"dir"`
	Queue   int       `json:"queue"`
	Packets *uint64   `json:"packets"`
	Bytes   *uint64   `json:"bytes"`
	Drops   *uint64   `json:"drops"`
}

type metric int

const (
	packets metric = iota
	bytesMetric
	drops
)

// statNaming is THE table of per-queue statistic names. Each pattern has
// the named groups q (queue index) and, unless fixed in the row, dir
// ("rx"/"tx"). Several rows may feed one metric: they add up (bnxt counts
// unicast, multicast and broadcast apart). Patterns are anchored, so one
// driver's names never match another row by accident; a name matches at
// most one row.
var statNaming = []struct {
	drivers string // who prints this form (documentation and tests)
	re      *regexp.Regexp
	dir     Direction // "" when the pattern captures dir
	metric  metric
}{
	{"ixgbe, ixgbevf, igb, igc, ice, hv_netvsc, virtio_net < 6.11", regexp.MustCompile(`^(?P<dir>rx|tx)_queue_(?P<q>\d+)_packets$`), "", packets},
	{"ixgbe, ixgbevf, igb, igc, ice, hv_netvsc, virtio_net < 6.11", regexp.MustCompile(`^(?P<dir>rx|tx)_queue_(?P<q>\d+)_bytes$`), "", bytesMetric},
	{"igb, virtio_net < 6.11, veth", regexp.MustCompile(`^(?P<dir>rx|tx)_queue_(?P<q>\d+)_drops$`), "", drops},
	{"veth (packets through the peer's NAPI, counted on the receiver)", regexp.MustCompile(`^rx_queue_(?P<q>\d+)_xdp_packets$`), RX, packets},
	{"veth", regexp.MustCompile(`^rx_queue_(?P<q>\d+)_xdp_bytes$`), RX, bytesMetric},
	{"i40e, iavf, sfc", regexp.MustCompile(`^(?P<dir>rx|tx)-(?P<q>\d+)\.(?:(?:rx|tx)_)?packets$`), "", packets},
	{"i40e, iavf, sfc", regexp.MustCompile(`^(?P<dir>rx|tx)-(?P<q>\d+)\.(?:(?:rx|tx)_)?bytes$`), "", bytesMetric},
	{"mlx5_core, mlx4_en", regexp.MustCompile(`^(?P<dir>rx|tx)(?P<q>\d+)_packets$`), "", packets},
	{"mlx5_core, mlx4_en", regexp.MustCompile(`^(?P<dir>rx|tx)(?P<q>\d+)_bytes$`), "", bytesMetric},
	{"mlx5_core", regexp.MustCompile(`^tx(?P<q>\d+)_dropped$`), TX, drops},
	{"virtio_net ≥ 6.11", regexp.MustCompile(`^(?P<dir>rx|tx)(?P<q>\d+)_drops$`), "", drops},
	{"ena", regexp.MustCompile(`^queue_(?P<q>\d+)_(?P<dir>rx|tx)_cnt$`), "", packets},
	{"ena", regexp.MustCompile(`^queue_(?P<q>\d+)_(?P<dir>rx|tx)_bytes$`), "", bytesMetric},
	{"bnxt_en", regexp.MustCompile(`^\[(?P<q>\d+)\]: (?P<dir>rx|tx)_(?:ucast|mcast|bcast)_packets$`), "", packets},
	{"bnxt_en", regexp.MustCompile(`^\[(?P<q>\d+)\]: (?P<dir>rx|tx)_(?:ucast|mcast|bcast)_bytes$`), "", bytesMetric},
	{"bnxt_en", regexp.MustCompile(`^\[(?P<q>\d+)\]: (?P<dir>rx|tx)_discards$`), "", drops},
}

// PerQueue turns driver statistics into per-queue counters, sorted RX
// before TX and by queue. Statistics that are not per queue are ignored;
// a driver with no per-queue statistics gives nil.
func PerQueue(stats []Stat) []QueueCounters {
	type key struct {
		dir   Direction
		queue int
	}
	byQueue := map[key]*QueueCounters{}
	for _, s := range stats {
		for _, row := range statNaming {
			m := row.re.FindStringSubmatch(s.Name)
			if m == nil {
				continue
			}
			dir := row.dir
			if dir == "" {
				dir = Direction(m[row.re.SubexpIndex("dir")])
			}
			q, err := strconv.Atoi(m[row.re.SubexpIndex("q")])
			if err != nil {
				break
			}
			k := key{dir, q}
			qc := byQueue[k]
			if qc == nil {
				qc = &QueueCounters{Dir: dir, Queue: q}
				byQueue[k] = qc
			}
			add(qc.field(row.metric), s.Value)
			break
		}
	}
	if len(byQueue) == 0 {
		return nil
	}
	out := make([]QueueCounters, 0, len(byQueue))
	for _, qc := range byQueue {
		out = append(out, *qc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir == RX
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

func (qc *QueueCounters) field(m metric) **uint64 {
	switch m {
	case bytesMetric:
		return &qc.Bytes
	case drops:
		return &qc.Drops
	}
	return &qc.Packets
}

func add(p **uint64, v uint64) {
	if *p == nil {
		*p = new(uint64)
	}
	**p += v
}

// SubQueues returns cur − prev per queue and counter (counters that went
// backwards, after a driver reset, count from zero).
func SubQueues(cur, prev []QueueCounters) []QueueCounters {
	out := make([]QueueCounters, len(cur))
	for i, c := range cur {
		d := QueueCounters{Dir: c.Dir, Queue: c.Queue}
		var p *QueueCounters
		for j := range prev {
			if prev[j].Dir == c.Dir && prev[j].Queue == c.Queue {
				p = &prev[j]
				break
			}
		}
		for _, m := range []metric{packets, bytesMetric, drops} {
			v := *c.field(m)
			if v == nil {
				continue
			}
			diff := *v
			if p != nil {
				if pv := *p.field(m); pv != nil && *pv <= diff {
					diff -= *pv
				}
			}
			*d.field(m) = &diff
		}
		out[i] = d
	}
	return out
}

// DeadShare is the default threshold of Balance: a queue carrying less than
// 1% of the mean per-queue packets while others carry traffic is dead.
const DeadShare = 0.01

// Balance summarises how evenly one direction's queues carried packets.
type Balance struct {
	Dir    Direction `json:"dir"`
	Queues int       `json:"queues"` // queues with a packet counter
	Total  uint64    `json:"total_packets"`
	Mean   float64   `json:"mean_packets"`
	// Max and MaxQueue are the busiest queue; Skew is Max/Mean (1 is
	// perfectly even; N queues with one carrying everything gives N).
	Max      uint64  `json:"max_packets"`
	MaxQueue int     `json:"max_queue"`
	Skew     float64 `json:"skew"`
	// Dead lists queues with fewer than deadShare × Mean packets while the
	// direction carried traffic — Makita's rx_queue_16..19.
	Dead []int `json:"dead_queues"`
}

// QueueBalance computes the balance of dir over qs (typically deltas).
// deadShare ≤ 0 uses DeadShare.
func QueueBalance(qs []QueueCounters, dir Direction, deadShare float64) Balance {
	if deadShare <= 0 {
		deadShare = DeadShare
	}
	b := Balance{Dir: dir, MaxQueue: -1, Dead: []int{}}
	for _, q := range qs {
		if q.Dir != dir || q.Packets == nil {
			continue
		}
		b.Queues++
		b.Total += *q.Packets
		if b.MaxQueue < 0 || *q.Packets > b.Max {
			b.Max, b.MaxQueue = *q.Packets, q.Queue
		}
	}
	if b.Queues == 0 || b.Total == 0 {
		return b
	}
	b.Mean = float64(b.Total) / float64(b.Queues)
	b.Skew = float64(b.Max) / b.Mean
	for _, q := range qs {
		if q.Dir == dir && q.Packets != nil && float64(*q.Packets) < deadShare*b.Mean {
			b.Dead = append(b.Dead, q.Queue)
		}
	}
	return b
}

func sortInts(s []int) { sort.Ints(s) }
