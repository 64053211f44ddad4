package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// LoadData is the data section of `perfscope load`: the levels and the
// knee. It draws its own text and page sections.
type LoadData struct {
	evidence.Load
}

var (
	_ Texter        = LoadData{}
	_ PageSectioner = LoadData{}
)

// LoadProgress is a stepped load's progress for a terminal: a line on w
// when the probe watches (started), and one as each level ends (level).
func LoadProgress(w io.Writer, url string, levels int, perLevel time.Duration) (started func(), level func(evidence.LoadLevel)) {
	started = func() {
		fmt.Fprintf(w, "loading %s at %d levels of %v (Ctrl-C stops early)…\n", url, levels, perLevel)
	}
	level = func(l evidence.LoadLevel) {
		fmt.Fprintf(w, "  concurrency %d: %.0f requests/s, p99 %s, %d errors\n", l.Concurrency, l.RPS, Nanos(float64(l.P99Ns)), l.Errors)
	}
	return started, level
}

// WriteText prints the levels as one table, the knee, the findings and
// what was not seen.
func (d LoadData) WriteText(w io.Writer, r *Report) error {
	ev := d.Load
	fmt.Fprintf(w, "perfscope load — %s %s; service %s; %s per level; %d CPUs, kernel %s\n",
		ev.Method, ev.URL, loadService(ev), loadBounds(ev), ev.CPUs, r.Meta.Kernel)
	for _, warn := range ev.Warnings {
		fmt.Fprintf(w, "note: %s\n", warn)
	}
	Heading(w, "Levels")
	t := loadTable(ev)
	t.Write(w)
	fmt.Fprintln(w, "svc CPU: CPUs the service used (/proc/PID/stat); gen CPU: CPUs perfscope used (the load and the probe's reading); busy: the machine's CPUs (/proc/stat); on/run/blocked: shares of the service's threads' time; top wait: the largest wait by reason and call site, with the threads waiting there on average (idle workers left out)")
	Heading(w, "Knee")
	if k := ev.Knee; k != nil {
		fmt.Fprintf(w, "throughput stopped rising at concurrency %d: %.0f requests/s, p99 %s; at %d: %.0f requests/s (%.0f %% of the gain the added concurrency would give), p99 %s\n",
			k.Concurrency, k.RPS, Nanos(float64(k.P99Ns)), k.Flat, k.FlatRPS, 100*k.Gain, Nanos(float64(k.FlatP99Ns)))
		fmt.Fprintf(w, "cause: %s — %s\n", k.Reason, k.Why)
	} else if len(ev.Levels) > 1 {
		fmt.Fprintln(w, "none: throughput rose with every level (or latency did not climb where it stalled); raise --concurrency to find it")
	} else {
		fmt.Fprintln(w, "none: one level cannot show a knee")
	}
	writeFindingsIfAny(w, r.Findings)
	writeOverhead(w, r.Overhead)
	return nil
}

func loadService(ev evidence.Load) string {
	pids := make([]string, len(ev.PIDs))
	for i, p := range ev.PIDs {
		pids[i] = fmt.Sprint(p)
	}
	from := ""
	if ev.PIDFrom == "port" {
		from = ", the owners of the URL's port"
	}
	return fmt.Sprintf("%s (pid %s%s)", ev.Comm, strings.Join(pids, ", "), from)
}

func loadBounds(ev evidence.Load) string {
	var b []string
	if ev.DurationPerLevelNs > 0 {
		b = append(b, time.Duration(ev.DurationPerLevelNs).String())
	}
	if ev.RequestsPerLevel > 0 {
		b = append(b, fmt.Sprintf("%d requests", ev.RequestsPerLevel))
	}
	return strings.Join(b, " or ")
}

// loadTable is the levels, one row each, for the text and the page.
func loadTable(ev evidence.Load) Table {
	t := Table{Header: []string{"concurrency", "req/s", "p50", "p99", "errors", "svc CPU", "gen CPU", "busy", "on", "run", "blocked", "runq p99", "top wait"}}
	for _, l := range ev.Levels {
		cpu, gen, busy := "-", "-", "-"
		if l.ServiceCPU >= 0 {
			cpu = fmt.Sprintf("%.2f", l.ServiceCPU)
		}
		if l.LoadGeneratorCPU >= 0 {
			gen = fmt.Sprintf("%.2f", l.LoadGeneratorCPU)
		}
		if l.CPUBusy >= 0 {
			busy = Percent(l.CPUBusy)
		}
		row := []string{fmt.Sprint(l.Concurrency), fmt.Sprintf("%.1f", l.RPS), Nanos(float64(l.P50Ns)), Nanos(float64(l.P99Ns)),
			fmt.Sprint(l.Errors), cpu, gen, busy}
		if th := l.Threads; th != nil {
			top := "-"
			if tw := th.TopWait; tw != nil {
				top = fmt.Sprintf("%s %s (%.1f threads)", tw.Reason, tw.Site, tw.Threads)
			}
			row = append(row, Percent(th.OnCPUShare), Percent(th.RunnableShare), Percent(th.BlockedShare), Nanos(float64(th.RunQueueP99Ns)), top)
		} else {
			row = append(row, "-", "-", "-", "-", "-")
		}
		t.Add(row...)
	}
	return t
}

// PageSections are the levels' throughput and p99 as bar charts, and
// the table.
func (d LoadData) PageSections() []PageSection {
	ev := d.Load
	rps := BarChart{Title: "Requests per second by concurrency", Desc: "throughput at each concurrency level", Narrow: true,
		Format: func(v float64) string { return fmt.Sprintf("%.0f/s", v) }}
	p99 := BarChart{Title: "p99 latency by concurrency", Desc: "the 99th percentile latency at each level", Narrow: true,
		Format: func(v float64) string { return Nanos(v) }}
	for _, l := range ev.Levels {
		label := fmt.Sprintf("concurrency %d", l.Concurrency)
		rps.Bars = append(rps.Bars, ChartBar{Label: label, Value: l.RPS})
		p99.Bars = append(p99.Bars, ChartBar{Label: label, Value: float64(l.P99Ns)})
	}
	t := loadTable(ev)
	sec := PageSection{ID: "load", Title: "Concurrency levels", Pairs: true, Charts: []Chart{rps, p99},
		Tables: []PageTable{{Caption: "each level", Header: t.Header, Rows: t.Rows}}}
	if k := ev.Knee; k != nil {
		sec.Notes = append(sec.Notes, fmt.Sprintf("knee: concurrency %d (%.0f requests/s); at %d throughput rose %.0f %% of what the added concurrency would give while p99 went from %s to %s. Cause: %s — %s",
			k.Concurrency, k.RPS, k.Flat, 100*k.Gain, Nanos(float64(k.P99Ns)), Nanos(float64(k.FlatP99Ns)), k.Reason, k.Why))
	}
	return []PageSection{sec}
}
