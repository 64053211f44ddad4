package tcplab

import (
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/report"
)

// rowDef is one row of the before/after table: where its number comes
// from in a phase.
type rowDef struct {
	label, unit, source string
	value               func(p phase) *float64
}

func f64(v float64) *float64 { return &v }

// perS is n per second of the run's window (nil without counters).
func perS(p phase, n func(w *evidence.TCPCounters) uint64) *float64 {
	t := p.run.Data.TCP
	if t == nil || t.Counters.Window == nil || t.DurationNs <= 0 {
		return nil
	}
	return f64(float64(n(t.Counters.Window)) / (float64(t.DurationNs) / 1e9))
}

// labPerS is n per second of the time perfscope ran.
func labPerS(p phase, n uint64) *float64 {
	if p.elapsed <= 0 {
		return nil
	}
	return f64(float64(n) / p.elapsed.Seconds())
}

// listenerMax is the largest of f over the port's listeners.
func listenerMax(p phase, f func(l evidence.TCPListener) float64) *float64 {
	t := p.run.Data.TCP
	if t == nil || len(t.Listeners.Rows) == 0 {
		return nil
	}
	var m float64
	for _, l := range t.Listeners.Rows {
		m = max(m, f(l))
	}
	return &m
}

// netRXTime is the NET_RX softirq time over the window, every CPU, in ns.
func netRXTime(p phase) (ns, window float64, ok bool) {
	s := p.run.Data.Softirq
	if s.DurationNs <= 0 || len(s.CPUs) == 0 {
		return 0, 0, false
	}
	for _, c := range s.CPUs {
		ns += float64(c.Vectors["NET_RX"].TimeNs)
	}
	return ns, float64(s.DurationNs), true
}

// serverConns is the mean of f over the server's connections on Port
// that carried data over the window (nil: none, or f had no value).
func serverConns(p phase, f func(c evidence.TCPConnection) *float64) *float64 {
	t := p.run.Data.TCP
	if t == nil {
		return nil
	}
	var sum float64
	n := 0
	for _, c := range t.Connections.Rows {
		if c.Local.Port() != Port || c.BytesWindow == nil || *c.BytesWindow == 0 {
			continue
		}
		if v := f(c); v != nil {
			sum += *v
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return f64(sum / float64(n))
}

var rowDefs = map[string]rowDef{
	RowConnects: {"connections completed/s (lab clients)", "per_s", "lab", func(p phase) *float64 { return labPerS(p, p.counts.Connects) }},
	RowSlowConnects: {"connections that took ≥ 1 s/s (a dropped SYN or ACK, retried)", "per_s", "lab", func(p phase) *float64 {
		return labPerS(p, p.counts.SlowConnects)
	}},
	RowOverflows: {"TcpExt ListenOverflows/s", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.ListenOverflows })
	}},
	RowListenDrops: {"TcpExt ListenDrops/s", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.ListenDrops })
	}},
	RowPassiveOpens: {"Tcp PassiveOpens/s (handshakes completed)", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.PassiveOpens })
	}},
	RowBacklog: {"listener backlog (min(listen(), somaxconn))", "count", "perfscope", func(p phase) *float64 {
		return listenerMax(p, func(l evidence.TCPListener) float64 { return float64(l.Backlog) })
	}},
	RowQueuePeak: {"accept queue at its fullest sample", "count", "perfscope", func(p phase) *float64 {
		return listenerMax(p, func(l evidence.TCPListener) float64 { return float64(l.QueuePeak) })
	}},
	RowFullSamples: {"samples that found the accept queue full", "count", "perfscope", func(p phase) *float64 {
		return listenerMax(p, func(l evidence.TCPListener) float64 { return float64(l.FullSamples) })
	}},
	RowBytes: {"bytes received/s (lab server)", "bytes/s", "lab", func(p phase) *float64 { return labPerS(p, p.counts.BytesReceived) }},
	RowInSegs: {"Tcp InSegs/s (segments the TCP layer took)", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.InSegs })
	}},
	RowNetRXShare: {"NET_RX softirq time, share of all CPUs", "fraction", "perfscope", func(p phase) *float64 {
		ns, window, ok := netRXTime(p)
		if !ok {
			return nil
		}
		return f64(ns / window / float64(len(p.run.Data.Softirq.CPUs)))
	}},
	RowNetRXPerMB: {"NET_RX time per MB received", "ns/MB", "perfscope+lab", func(p phase) *float64 {
		ns, window, ok := netRXTime(p)
		bps := labPerS(p, p.counts.BytesReceived)
		if !ok || bps == nil || *bps == 0 {
			return nil
		}
		return f64(ns / (window / 1e9) / (*bps / 1e6))
	}},
	RowPrune: {"TcpExt PruneCalled/s", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.PruneCalled })
	}},
	RowCollapsed: {"TcpExt TCPRcvCollapsed/s", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.TCPRcvCollapsed })
	}},
	RowRcvWnd: {"receive window (rcv_wnd), mean of the server's connections", "bytes", "perfscope", func(p phase) *float64 {
		return serverConns(p, func(c evidence.TCPConnection) *float64 {
			if c.RcvWnd == nil {
				return nil
			}
			return f64(float64(*c.RcvWnd))
		})
	}},
	RowRcvbuf: {"receive buffer (skmem rb), mean of the server's connections", "bytes", "perfscope", func(p phase) *float64 {
		return serverConns(p, func(c evidence.TCPConnection) *float64 { return f64(float64(c.Rcvbuf)) })
	}},
	RowRcvRTT: {"receiver's RTT estimate (rcv_rtt), mean of the server's connections", "ms", "perfscope", func(p phase) *float64 {
		return serverConns(p, func(c evidence.TCPConnection) *float64 {
			if c.RcvRTTUs == nil {
				return nil
			}
			return f64(float64(*c.RcvRTTUs) / 1e3)
		})
	}},
	RowDelayDrops: {"packets the delay line dropped at its full queue/s", "per_s", "lab", func(p phase) *float64 {
		if p.delay == nil {
			return nil
		}
		return labPerS(p, p.delay.DroppedFull)
	}},
	RowRcvDropped: {"RcvPruned + OfoPruned + TCPRcvQDrop /s", "per_s", "perfscope", func(p phase) *float64 {
		return perS(p, func(w *evidence.TCPCounters) uint64 { return w.RcvPruned + w.OfoPruned + w.TCPRcvQDrop })
	}},
}

// rows builds the table of keys from the two phases.
func rows(keys []string, before, after phase) []report.LabTCPRow {
	out := []report.LabTCPRow{}
	for _, k := range keys {
		d, ok := rowDefs[k]
		if !ok {
			continue
		}
		out = append(out, report.LabTCPRow{Key: k, Label: d.label, Unit: d.unit, Source: d.source, Before: d.value(before), After: d.value(after)})
	}
	return out
}
