package tcpevents

import (
	"github.com/cilium/ebpf"

	"github.com/perfscope/perfscope/probes"
)

// FeedGroup is the hook group of sock:sk_data_ready: it fires for every
// segment with data, so the overhead budget may attach it in sampling
// windows only; its counts are read as shares per CPU.
const FeedGroup = "tcpfeed"

// Feed is, for one TCP socket, how often data was queued on it
// (sock:sk_data_ready) on each CPU, by the context that queued it.
type Feed struct {
	// Softirq[cpu] are the receive path's deliveries on cpu: the CPU
	// whose softirq fed the socket.
	Softirq []uint64
	// Process are deliveries by the socket owner's release_sock (the
	// backlog processed on the owner's CPU), Unknown those whose context
	// was not told (classic tracepoint attachment, not x86-64).
	Process, Unknown uint64
	// Reads[cpu] are the reads (sock:sock_recv_length returning data) on
	// cpu: where the threads serving the socket ran.
	Reads []uint64
}

// Total is every delivery counted.
func (f Feed) Total() uint64 {
	n := f.Process + f.Unknown
	for _, v := range f.Softirq {
		n += v
	}
	return n
}

func readFeeds(m *ebpf.Map) (map[uint64]Feed, error) {
	if m == nil {
		return nil, nil
	}
	raw, err := probes.ReadPerCPUHash[uint64, tcpeventsTcpFeed](m)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]Feed, len(raw))
	for ino, perCPU := range raw {
		f := Feed{Softirq: make([]uint64, len(perCPU)), Reads: make([]uint64, len(perCPU))}
		for cpu, v := range perCPU {
			f.Softirq[cpu] = v.Softirq
			f.Reads[cpu] = v.Reads
			f.Process += v.Process
			f.Unknown += v.Unknown
		}
		out[ino] = f
	}
	return out, nil
}

// subFeeds is cur minus prev per socket, keeping sockets fed meanwhile.
func subFeeds(cur, prev map[uint64]Feed) map[uint64]Feed {
	out := map[uint64]Feed{}
	for ino, c := range cur {
		p, seen := prev[ino]
		if !seen || p.Total() > c.Total() || sumOf(p.Reads) > sumOf(c.Reads) {
			p = Feed{}
		}
		d := Feed{Softirq: perCPUSub(c.Softirq, p.Softirq), Reads: perCPUSub(c.Reads, p.Reads),
			Process: c.Process - p.Process, Unknown: c.Unknown - p.Unknown}
		if d.Total()+sumOf(d.Reads) > 0 {
			out[ino] = d
		}
	}
	return out
}

func perCPUSub(cur, prev []uint64) []uint64 {
	out := make([]uint64, len(cur))
	for cpu, v := range cur {
		if cpu < len(prev) {
			v -= prev[cpu]
		}
		out[cpu] = v
	}
	return out
}

func sumOf(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}
