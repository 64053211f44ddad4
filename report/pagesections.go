package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// pageSections lays out the page's sections by the data's type: the same
// data the JSON writes, drawn.
func pageSections(r *Report) []PageSection {
	switch d := r.Data.(type) {
	case NetData:
		return netSections(d.NetEvidence)
	case evidence.SoftirqEvidence:
		return softirqSections(d)
	case evidence.LockSection:
		return []PageSection{lockSection(d)}
	case evidence.Profile:
		return []PageSection{profileSection(d)}
	case evidence.OffCPU:
		return []PageSection{offCPUSection(d)}
	case RecipeData:
		var out []PageSection
		if d.Net != nil {
			out = append(out, netSections(d.Net.NetEvidence)...)
		}
		if d.Softirq != nil {
			out = append(out, softirqSections(*d.Softirq)...)
		}
		if d.Locks != nil {
			out = append(out, lockSection(*d.Locks))
		}
		if d.Profile != nil {
			out = append(out, profileSection(*d.Profile))
		}
		if d.JVM != nil {
			out = append(out, JVMSection(*d.JVM))
		}
		if d.GC != nil {
			out = append(out, gcSection(*d.GC, d.GCFiles))
		}
		if d.OffCPU != nil {
			out = append(out, offCPUSection(*d.OffCPU))
		}
		if d.Timeline != nil {
			out = append(out, timelineSection(*d.Timeline))
		}
		return out
	case PageSectioner:
		return d.PageSections()
	}
	return nil
}

// estimated is a bar's error: the row's own bound when it has one, else
// the section's; a sampled section without a bound is marked "±?".
func estimated(b ChartBar, e *evidence.Estimate, row *float64) ChartBar {
	switch {
	case row != nil:
		b.RelError = row
	case e != nil && e.RelError != nil:
		b.RelError = e.RelError
	case e != nil:
		b.Estimated = true
	}
	return b
}

func softirqSections(ev evidence.SoftirqEvidence) []PageSection {
	s := PageSection{ID: "softirq", Title: "Softirq time per CPU"}
	chart := BarChart{Title: "Softirq share of each CPU's time", Format: Percent, Max: 0,
		Desc: "For each CPU, the share of its time spent in softirqs (all vectors) and in NET_RX alone; error bars where the probe ran in sampling windows."}
	t := PageTable{Caption: "Softirq time per CPU", Header: []string{"CPU", "softirq", "NET_RX", "NET_TX", "NET_RX count", "/proc/stat softirq"}}
	for _, c := range ev.CPUs {
		label := fmt.Sprintf("cpu%d", c.CPU)
		rx, tx := c.Vectors["NET_RX"], c.Vectors["NET_TX"]
		chart.Bars = append(chart.Bars,
			estimated(ChartBar{Label: label, Value: c.Share, Series: "all softirqs"}, ev.Estimate, nil),
			estimated(ChartBar{Label: label, Value: rx.Share, Series: "NET_RX"}, ev.Estimate, nil))
		t.Add(label, Percent(c.Share), Percent(rx.Share), Percent(tx.Share), fmt.Sprint(rx.Count), Percent(c.ProcStatShare))
	}
	s.Charts = append(s.Charts, chart)
	s.Tables = append(s.Tables, t)
	if ev.Estimate != nil {
		s.Notes = append(s.Notes, "Times "+ev.Estimate.String())
	}
	if len(ev.Intervals) > 0 {
		s.Charts = append(s.Charts, softirqHeat(ev.Intervals))
		it := PageTable{Caption: "Softirq per interval", Header: []string{"end", "NET_RX/s", "NET_RX share", "NET_TX share", "busiest CPU"}}
		for _, iv := range ev.Intervals {
			it.Add(iv.End.Format("15:04:05.0"), Count(iv.NetRXPerS), Percent(iv.NetRXShare), Percent(iv.NetTXShare), fmt.Sprintf("cpu%d %s", iv.BusiestCPU, Percent(iv.BusiestShare)))
		}
		s.Tables = append(s.Tables, it)
	}
	return []PageSection{s}
}

// softirqHeat is the intervals as a heat map. The run keeps, per
// interval, the shares over all CPUs and the busiest CPU's: those are
// its rows (a per-CPU-per-interval grid is not recorded).
func softirqHeat(ivs []evidence.SoftirqInterval) HeatMap {
	m := HeatMap{Title: "Softirq over time", Format: Percent, Max: 1,
		Desc: "Per interval: NET_RX and NET_TX share of all measured CPUs' time, and the softirq share of the busiest CPU (named in the table)."}
	m.Rows = []string{"NET_RX share", "NET_TX share", "busiest CPU"}
	m.Cells = make([][]*float64, 3)
	for _, iv := range ivs {
		m.Cols = append(m.Cols, iv.End.Format("15:04:05"))
		rx, tx, b := iv.NetRXShare, iv.NetTXShare, iv.BusiestShare
		m.Cells[0] = append(m.Cells[0], &rx)
		m.Cells[1] = append(m.Cells[1], &tx)
		m.Cells[2] = append(m.Cells[2], &b)
	}
	return m
}

func netSections(ev evidence.NetEvidence) []PageSection {
	out := softirqSections(ev.Softirq)
	out = append(out, queueSection(ev), queueCPUSection(ev), lockSection(ev.Locks))
	if ev.TCP != nil {
		return append(out, tcpSection(*ev.TCP))
	}
	return append(out, dropSection(ev.Drops), socketSection(ev.Sockets))
}

func opt(p *uint64) (float64, string) {
	if p == nil {
		return 0, "–"
	}
	return float64(*p), fmt.Sprint(*p)
}

func queueSection(ev evidence.NetEvidence) PageSection {
	q := ev.Queues
	s := PageSection{ID: "queues", Title: fmt.Sprintf("Packets per RX queue (%s)", ev.Interface.Name)}
	if q.Unavailable != "" {
		s.Notes = append(s.Notes, "Unavailable: "+q.Unavailable)
		return s
	}
	chart := BarChart{Title: "Packets per RX queue", Desc: "Packets each RX queue received over the window, as the kernel's NAPI polls counted them and as the driver's counters say."}
	t := PageTable{Caption: "RX queues", Header: []string{"queue", "kernel packets", "driver packets", "driver drops", "packets/s", "kernel vs driver", "dead"}}
	for _, row := range q.RX {
		label := fmt.Sprintf("rx-%d", row.Queue)
		kv, ks := opt(row.KernelPackets)
		dv, ds := opt(row.DriverPackets)
		_, drops := opt(row.DriverDrops)
		if row.KernelPackets != nil {
			chart.Bars = append(chart.Bars, estimated(ChartBar{Label: label, Value: kv, Series: "kernel"}, q.Estimate, row.RelError))
		}
		if row.DriverPackets != nil {
			chart.Bars = append(chart.Bars, ChartBar{Label: label, Value: dv, Series: "driver"})
		}
		diff := "–"
		if row.Diff != nil {
			diff = Percent(*row.Diff)
		}
		dead := ""
		if row.Dead {
			dead = "dead"
		}
		t.Add(label, withError(ks, row.RelError), ds, drops, Count(row.PerS), diff, dead)
	}
	s.Charts = append(s.Charts, chart)
	s.Tables = append(s.Tables, t)
	if b := q.RXBalance; b.Queues > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("RX balance (%s): %d queues, %d packets, busiest %d, skew %.2f, dead queues %v", b.Source, b.Queues, b.Total, b.Max, b.Skew, b.Dead))
	}
	s.Notes = append(s.Notes, q.Notes...)
	return s
}

// queueCPUSection is which CPU serves which queue: each queue's IRQ, its
// affinity and the CPUs it fired on, and the CPUs NAPI polled it on.
func queueCPUSection(ev evidence.NetEvidence) PageSection {
	s := PageSection{ID: "queue-irq-cpu", Title: "Queue → IRQ → CPU"}
	if ev.IRQs.Unavailable != "" {
		s.Notes = append(s.Notes, "IRQs unavailable: "+ev.IRQs.Unavailable)
	}
	if ev.QueueCPU.Unavailable != "" {
		s.Notes = append(s.Notes, "NAPI polls per CPU unavailable: "+ev.QueueCPU.Unavailable)
	}
	polls := map[int][]string{}
	queues, cpus := map[int]bool{}, map[int]bool{}
	work := map[[2]int]float64{}
	for _, c := range ev.QueueCPU.Cells {
		polls[c.Queue] = append(polls[c.Queue], fmt.Sprintf("cpu%d: %d polls, %d packets", c.CPU, c.Polls, c.Work))
		queues[c.Queue], cpus[c.CPU] = true, true
		work[[2]int{c.Queue, c.CPU}] += float64(c.Work)
	}
	t := PageTable{Caption: "Queue, IRQ and CPUs", Header: []string{"queue", "IRQ", "name", "smp_affinity", "effective", "IRQs by CPU", "NAPI work by CPU"}}
	seen := map[int]bool{}
	for _, irq := range ev.IRQs.IRQs {
		var counts []string
		for _, cpu := range sortedKeys(irq.CountByCPU) {
			if n := irq.CountByCPU[cpu]; n > 0 {
				counts = append(counts, fmt.Sprintf("cpu%d: %d", cpu, n))
			}
		}
		t.Add(fmt.Sprint(irq.Queue), fmt.Sprint(irq.IRQ), irq.Name, irq.SMPAffinity, irq.Effective, strings.Join(counts, ", "), strings.Join(polls[irq.Queue], "; "))
		seen[irq.Queue] = true
	}
	for _, q := range sortedKeys(polls) {
		if !seen[q] {
			t.Add(fmt.Sprint(q), "–", "", "", "", "", strings.Join(polls[q], "; "))
		}
	}
	s.Tables = append(s.Tables, t)
	if len(work) > 0 {
		m := HeatMap{Title: "Packets each CPU polled from each RX queue", Desc: "NAPI work (packets) per queue and CPU over the window; one busy cell per row means one CPU serves that queue."}
		qs, cs := sortedKeys(queues), sortedKeys(cpus)
		for _, c := range cs {
			m.Cols = append(m.Cols, fmt.Sprintf("cpu%d", c))
		}
		for _, q := range qs {
			label := fmt.Sprintf("rx-%d", q)
			if q < 0 {
				label = "no queue"
			}
			m.Rows = append(m.Rows, label)
			row := make([]*float64, len(cs))
			for j, c := range cs {
				if v, ok := work[[2]int{q, c}]; ok {
					row[j] = &v
				} else {
					zero := 0.0
					row[j] = &zero
				}
			}
			m.Cells = append(m.Cells, row)
		}
		s.Charts = append(s.Charts, m)
	}
	if ev.QueueCPU.Mapping != "" {
		s.Notes = append(s.Notes, "Queues named by "+ev.QueueCPU.Mapping)
	}
	return s
}

func lockSection(l evidence.LockSection) PageSection {
	s := PageSection{ID: "locks", Title: "Lock wait"}
	if l.Unavailable != "" {
		s.Notes = append(s.Notes, "Unavailable: "+l.Unavailable)
		return s
	}
	byClass := BarChart{Title: "Lock wait by class", Format: Nanos, Desc: "Total time threads waited for contended kernel locks, by the kind of lock."}
	classes := make([]string, 0, len(l.ByClass))
	for c := range l.ByClass {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return l.ByClass[classes[i]] > l.ByClass[classes[j]] })
	for _, c := range classes {
		byClass.Bars = append(byClass.Bars, estimated(ChartBar{Label: c, Value: float64(l.ByClass[c])}, l.Estimate, nil))
	}
	bySocket := BarChart{Title: "Lock wait by socket", Format: Nanos, Desc: "Time waited on each socket's locks (receive queue, wakeup, socket lock)."}
	st := PageTable{Caption: "Lock wait by socket", Header: []string{"socket", "waits", "total", "max", "by lock"}}
	for _, sc := range l.Sockets {
		label := socketLabel(sc.Socket)
		bySocket.Bars = append(bySocket.Bars, estimated(ChartBar{Label: shorten(label, 27), Value: float64(sc.TotalNs)}, l.Estimate, sc.RelError))
		st.Add(label, fmt.Sprint(sc.Count), withError(Nanos(float64(sc.TotalNs)), sc.RelError), Nanos(float64(sc.MaxNs)), lockSplit(sc.ByLock))
	}
	sites := PageTable{Caption: "Contended lock sites", Header: []string{"class", "site", "waits", "total", "max", "socket"}}
	for i, site := range l.Sites {
		if i == 20 {
			break
		}
		sock := ""
		if site.Socket != nil {
			sock = socketLabel(*site.Socket)
		}
		sites.Add(site.Class, site.Site, fmt.Sprint(site.Count), Nanos(float64(site.TotalNs)), Nanos(float64(site.MaxNs)), sock)
	}
	s.Charts = append(s.Charts, byClass, bySocket)
	s.Tables = append(s.Tables, st, sites)
	s.Notes = append(s.Notes, fmt.Sprintf("Total %s; %d contentions lost; kernel stacks taken for 1 in %d contentions.", Nanos(float64(l.TotalNs)), l.Lost, max(l.StackEvery, 1)))
	return s
}

func dropSection(d evidence.DropSection) PageSection {
	s := PageSection{ID: "drops", Title: "Drops"}
	if d.Unavailable != "" {
		s.Notes = append(s.Notes, "Unavailable: "+d.Unavailable)
		return s
	}
	byPort := BarChart{Title: "Drops by port and reason", Desc: "Packets the kernel dropped, by the local port they were addressed to and the kernel's drop reason."}
	t := PageTable{Caption: "Drops by port and reason", Header: []string{"port", "reason", "packets"}}
	for _, p := range d.ByPort {
		label := fmt.Sprintf("port %d %s", p.Port, p.Reason)
		byPort.Bars = append(byPort.Bars, estimated(ChartBar{Label: shorten(label, 27), Value: float64(p.Count)}, d.Estimate, p.RelError))
		t.Add(fmt.Sprint(p.Port), p.Reason, withError(fmt.Sprint(p.Count), p.RelError))
	}
	byReason := BarChart{Title: "Drops by reason", Desc: "Packets dropped over the window by the kernel's drop reason, every port."}
	reasons := make([]string, 0, len(d.ByReason))
	for r := range d.ByReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool { return d.ByReason[reasons[i]] > d.ByReason[reasons[j]] })
	rt := PageTable{Caption: "Drops by reason", Header: []string{"reason", "packets"}}
	for _, r := range reasons {
		byReason.Bars = append(byReason.Bars, estimated(ChartBar{Label: shorten(r, 27), Value: float64(d.ByReason[r])}, d.Estimate, nil))
		rt.Add(r, fmt.Sprint(d.ByReason[r]))
	}
	s.Charts = append(s.Charts, byPort, byReason)
	s.Tables = append(s.Tables, t, rt)
	s.Notes = append(s.Notes, d.Notes...)
	return s
}

func socketSection(ss evidence.SocketSection) PageSection {
	s := PageSection{ID: "sockets", Title: "Sockets"}
	if ss.Unavailable != "" {
		s.Notes = append(s.Notes, "Unavailable: "+ss.Unavailable)
		return s
	}
	if ss.Warning != "" {
		s.Notes = append(s.Notes, ss.Warning)
	}
	if ss.ReceivedUnavailable != "" {
		s.Notes = append(s.Notes, "Datagrams read: "+ss.ReceivedUnavailable)
	}
	t := PageTable{Caption: "UDP sockets", Header: []string{"local", "inode", "pid", "rx queue", "drops", "datagrams read", "read/s", "fed by CPUs"}}
	for _, k := range ss.Sockets {
		read, perS := "–", "–"
		if k.ReceivedPkt != nil {
			read = withError(fmt.Sprint(*k.ReceivedPkt), k.ReceivedRelError)
		}
		if k.ReceivedPerS != nil {
			perS = Count(*k.ReceivedPerS)
		}
		pid := ""
		if k.PID > 0 {
			pid = fmt.Sprint(k.PID)
		}
		t.Add(k.Local, fmt.Sprint(k.Inode), pid, Bytes(float64(k.RxQueueB)), fmt.Sprint(k.DropsDelta), read, perS, feeders(k))
	}
	s.Tables = append(s.Tables, t)
	if len(ss.Groups) > 0 {
		g := PageTable{Caption: "SO_REUSEPORT groups", Header: []string{"local", "sockets", "inodes"}}
		for _, gr := range ss.Groups {
			g.Add(gr.Local, fmt.Sprint(gr.Size), fmt.Sprint(gr.Inodes))
		}
		s.Tables = append(s.Tables, g)
	}
	if len(ss.Threads) > 0 {
		th := PageTable{Caption: "Server threads", Header: []string{"tid", "comm", "last CPU", "allowed CPUs"}}
		for _, tr := range ss.Threads {
			th.Add(fmt.Sprint(tr.TID), tr.Comm, fmt.Sprint(tr.LastCPU), tr.AllowedCPUs)
		}
		s.Tables = append(s.Tables, th)
	}
	return s
}

func profileSection(p evidence.Profile) PageSection {
	s := PageSection{ID: "profile", Title: "On-CPU profile"}
	t := PageTable{Caption: "Profile", Header: []string{"target", "frequency", "samples", "lost", "duration"}}
	t.Add(p.Target, fmt.Sprintf("%d Hz", p.FrequencyHz), fmt.Sprint(p.Samples), fmt.Sprint(p.Lost), Nanos(float64(p.DurationNs)))
	s.Tables = append(s.Tables, t)
	if len(p.TopFunctions) > 0 {
		chart := BarChart{Title: "Top functions by samples", Desc: "Functions that were on CPU in the most samples (self)."}
		ft := PageTable{Caption: "Top functions", Header: []string{"function", "self samples", "total samples"}}
		for i, f := range p.TopFunctions {
			if i == 15 {
				break
			}
			chart.Bars = append(chart.Bars, ChartBar{Label: shorten(f.Function, 27), Value: float64(f.Self)})
			ft.Add(f.Function, fmt.Sprint(f.Self), fmt.Sprint(f.Total))
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, ft)
	}
	s.Notes = append(s.Notes, p.Warnings...)
	return s
}

// timelineSection is a recipe's joined timeline as a heat map, one row
// per measure (each row shaded against its own largest value).
func timelineSection(tl evidence.Timeline) PageSection {
	s := PageSection{ID: "timeline", Title: "Timeline"}
	rows := append([]evidence.TimelineRow(nil), tl.Rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].End.Before(rows[j].End) })
	type measure struct {
		name string
		get  func(evidence.TimelineRow) *float64
	}
	f := func(p *float64) *float64 { return p }
	u := func(p *uint64) *float64 {
		if p == nil {
			return nil
		}
		v := float64(*p)
		return &v
	}
	i64 := func(p *int64) *float64 {
		if p == nil {
			return nil
		}
		v := float64(*p)
		return &v
	}
	measures := []measure{
		{"NET_RX share", func(r evidence.TimelineRow) *float64 { return f(r.NetRXShare) }},
		{"busiest CPU", func(r evidence.TimelineRow) *float64 { return f(r.BusiestShare) }},
		{"NET_RX/s", func(r evidence.TimelineRow) *float64 { return f(r.NetRXPerS) }},
		{"read/s", func(r evidence.TimelineRow) *float64 { return f(r.DatagramsPerS) }},
		{"drops/s", func(r evidence.TimelineRow) *float64 { return f(r.DropsPerS) }},
		{"lock wait ns", func(r evidence.TimelineRow) *float64 { return u(r.LockWaitNs) }},
		{"JVM stopped ns", func(r evidence.TimelineRow) *float64 { return i64(r.StoppedNs()) }},
	}
	t := PageTable{Caption: "Timeline", Header: []string{"end"}}
	var shown []measure
	for _, m := range measures {
		for _, r := range rows {
			if m.get(r) != nil {
				shown = append(shown, m)
				t.Header = append(t.Header, m.name)
				break
			}
		}
	}
	for _, r := range rows {
		cells := []string{r.End.Format("15:04:05.0")}
		for _, m := range shown {
			v := "–"
			if p := m.get(r); p != nil {
				v = Count(*p)
				if strings.HasSuffix(m.name, "share") || m.name == "busiest CPU" {
					v = Percent(*p)
				}
			}
			cells = append(cells, v)
		}
		t.Add(cells...)
	}
	// One heat map per measure keeps each row's shade its own scale.
	for _, m := range shown {
		hm := HeatMap{Title: "Timeline: " + m.name, Desc: m.name + " per interval.", Rows: []string{m.name}, Cells: [][]*float64{nil}}
		if strings.HasSuffix(m.name, "share") || m.name == "busiest CPU" {
			hm.Format, hm.Max = Percent, 1
		}
		for _, r := range rows {
			hm.Cols = append(hm.Cols, r.End.Format("15:04:05"))
			hm.Cells[0] = append(hm.Cells[0], m.get(r))
		}
		s.Charts = append(s.Charts, hm)
	}
	s.Tables = append(s.Tables, t)
	return s
}

// shorten keeps a chart label to n runes (the table beside has it whole).
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// JVMSection is a JVM's allocation and GC as a page section: the
// measures and the allocating frames by weight.
func JVMSection(e evidence.JVM) PageSection {
	s := PageSection{ID: "jvm", Title: fmt.Sprintf("JVM pid %d (%s): allocation and GC", e.PID, e.Collector)}
	t := PageTable{Caption: "Allocation and GC", Header: []string{"measure", "value"}}
	if e.AllocBytesProfiler > 0 {
		t.Add("allocated (async-profiler)", Bytes(float64(e.AllocBytesProfiler)))
	}
	t.Add("allocated (hsperfdata Eden)", Bytes(float64(e.AllocBytesEden)))
	t.Add("allocation rate (Eden)", Bytes(e.AllocRateEden)+"/s")
	if n, ok := e.RequestCount(); ok {
		t.Add("requests ("+e.RequestsSource+")", fmt.Sprint(n))
	} else {
		t.Add("requests", "unknown: "+e.RequestsUnknown)
	}
	if b, ok := e.PerRequest(); ok {
		t.Add("bytes per request", Bytes(b))
	} else if e.BytesPerRequestUnknown != "" {
		t.Add("bytes per request", "unknown: "+e.BytesPerRequestUnknown)
	}
	t.Add("young GCs", fmt.Sprintf("%d (%.1f/min, mean pause %s)", e.YoungGCs, e.YoungGCsPerMinute, Nanos(e.MeanYoungPauseNs)))
	t.Add("GC time share", Percent(e.GCTimeShare))
	s.Tables = append(s.Tables, t)
	if len(e.Sites) > 0 {
		chart := BarChart{Title: "Allocating frames (async-profiler event " + e.ProfileEvent + ")", Format: Percent,
			Desc: "Share of the profiled weight allocated at each frame, largest first."}
		st := PageTable{Caption: "Allocating frames", Header: []string{"frame", "type", "share", "weight"}}
		for i, site := range e.Sites {
			if i == 15 {
				break
			}
			chart.Bars = append(chart.Bars, ChartBar{Label: shorten(site.Frame, 27), Value: site.Share})
			st.Add(site.Frame, site.Type, Percent(site.Share), Count(float64(site.Bytes)))
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, st)
	}
	return s
}
