package cli

import (
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/evidence"
)

// rxPathSample is what the receive-path rules read beside the per-queue
// counters: the driver's device-level statistics (missed packets) and the
// UDP memory in use.
type rxPathSample struct {
	stats       []ethtool.Stat
	statsErr    error
	sockstat    netstat.UDPSockstat
	sockstatErr error
}

func takeRXPathSample(stats []ethtool.Stat, statsErr error) rxPathSample {
	s := rxPathSample{stats: stats, statsErr: statsErr}
	s.sockstat, s.sockstatErr = netstat.Default.UDPSockstat()
	return s
}

// addRXPathCounters fills the NIC's missed packets over the window and the
// UDP memory at its end.
func addRXPathCounters(ev *evidence.NetEvidence, start, end rxPathSample) {
	if start.statsErr == nil && end.statsErr == nil {
		if n, names := ethtool.Missed(ethtool.SubStats(end.stats, start.stats)); len(names) > 0 {
			ev.Queues.NICMissed, ev.Queues.NICMissedCounters = &n, names
		}
	}
	if end.sockstatErr == nil {
		s := end.sockstat
		ev.Drops.UDPSockstat = &s
	}
}
