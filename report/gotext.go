package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/evidence"
)

// GoData is the JSON data section of `perfscope go` and the go-alloc
// recipe: evidence.Go, and the load when perfscope drove one.
type GoData struct {
	evidence.Go
	Load *httpload.Result `json:"load,omitempty"`
}

// WriteText implements Texter.
func (d GoData) WriteText(w io.Writer, r *Report) error {
	writeGoText(w, r, d.Go, d.Load)
	return nil
}

// PageSections implements PageSectioner.
func (d GoData) PageSections() []PageSection {
	return goSections(d.Go)
}

// writeGoText prints `perfscope go`'s report: the answer first (bytes
// per request with its bound, GC cycles), then where the bytes come from,
// the pools, what could not be seen, the findings and perfscope's own
// cost.
func writeGoText(w io.Writer, r *Report, e evidence.Go, load *httpload.Result) {
	fmt.Fprintf(w, "Go program pid %d (%s), %s, window %.1fs\n", e.PID, e.Executable, goBuild(e.Binary), float64(e.WindowNs)/1e9)
	for _, warn := range e.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "requests: %s\n", goRequests(e))

	Heading(w, "Bytes per request")
	if e.BytesPerRequest != nil {
		fmt.Fprintf(w, "%s%s per request, %s objects (whole process: what the GC sees)\n",
			Bytes(*e.BytesPerRequest), goPlusMinus(e.BytesPerRequestError), goFloat(e.ObjectsPerRequest, "%.1f"))
	} else {
		fmt.Fprintf(w, "unknown: %s\n", e.BytesPerRequestUnknown)
	}
	if e.AllocBytes != nil {
		fmt.Fprintf(w, "allocated: %s%s in the window, %s/s, %s objects\n", Bytes(*e.AllocBytes), goPlusMinus(e.AllocBytesError), Bytes(goDeref(e.AllocRate)), Count(goDeref(e.AllocObjects)))
	}
	fmt.Fprintf(w, "sampling: %s\n", goSampling(e.Sampling))

	Heading(w, "GC")
	fmt.Fprintf(w, "%d cycles in %.1fs (exact): %.1f per minute", e.GCCycles, float64(e.WindowNs)/1e9, e.GCCyclesPerMinute)
	if e.GCCyclesPerKReq != nil {
		fmt.Fprintf(w, ", %.2f per 1000 requests", *e.GCCyclesPerKReq)
	}
	if e.BytesPerGCCycle != nil {
		fmt.Fprintf(w, ", %s allocated per cycle", Bytes(*e.BytesPerGCCycle))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "settings: %s\n", goGCSettings(e.GC))

	if len(e.Sites) > 0 {
		Heading(w, "Allocation sites")
		t := Table{Header: []string{"share", "bytes", "per request", "objects/req", "size", "site"}}
		for i, s := range e.Sites {
			if r != nil && r.Show.Top > 0 && i >= r.Show.Top {
				break
			}
			t.Add(Percent(s.Share), Bytes(s.Bytes), goBytesPtr(s.BytesPerRequest), goFloat(s.ObjectsPerRequest, "%.2f"), Bytes(float64(s.Size)), goSiteLabel(s))
		}
		t.Write(w)
	}

	Heading(w, "sync.Pools")
	if len(e.Pools) > 0 {
		t := Table{Header: []string{"pool", "gets", "puts", "misses (New)", "hit rate", "gets/req"}}
		for _, p := range e.Pools {
			hit := "unseen (no New)"
			if p.HitRate != nil {
				hit = Percent(*p.HitRate)
			}
			t.Add(goPoolName(p), goCount(p.Gets, p.GetsError), goCount(p.Puts, p.PutsError), goCount(p.News, p.NewsError), hit, goFloat(p.GetsPerRequest, "%.2f"))
		}
		t.Write(w)
	} else if e.PoolsUnknown == "" {
		fmt.Fprintln(w, "no sync.Pool was used in the window")
	}
	if line := goPoolSampling(e.PoolSampling); line != "" {
		fmt.Fprintln(w, line)
	}
	if e.PoolsUnknown != "" {
		fmt.Fprintf(w, "not measured: %s\n", e.PoolsUnknown)
	}
	WriteLoad(w, load)
	if l := e.Lost; l != (evidence.GoLost{}) {
		fmt.Fprintf(w, "\nnot recorded: %d samples without a stack (counted in the totals), %d samples without a size (totals scaled), %d pool events (pool table full), %d misses not joined to their Get\n",
			l.SamplesNoSite, l.SamplesUncounted, l.PoolsFull, l.PoolNewUnjoined)
	}
	if r != nil {
		Heading(w, "Findings")
		WriteFindings(w, r.Findings)
		writeOverhead(w, r.Overhead)
		if r.Overhead != nil {
			fmt.Fprintln(w, "(the programs' own time; each uprobe hit also costs the kernel's trap, about a microsecond, which is not in it)")
		}
		for _, a := range r.Artifacts {
			fmt.Fprintf(w, "wrote %s: %s\n", a.Kind, a.Path)
		}
	}
}

// WriteLoad prints the load perfscope drove (nothing without one).
func WriteLoad(w io.Writer, l *httpload.Result) {
	if l == nil {
		return
	}
	Heading(w, "Load (perfscope drove it)")
	t := Table{Header: []string{"requests", "failures", "non-2xx", "req/s", "p50", "p90", "p99", "max"}}
	t.Add(strconv.FormatInt(l.Completed, 10), strconv.FormatInt(l.Failures, 10), strconv.FormatInt(l.Non2xx, 10), fmt.Sprintf("%.0f", l.RPS),
		Nanos(float64(l.P50Ns)), Nanos(float64(l.P90Ns)), Nanos(float64(l.P99Ns)), Nanos(float64(l.MaxNs)))
	t.Write(w)
	if l.FirstError != "" {
		fmt.Fprintf(w, "first failure: %s\n", l.FirstError)
	}
}

func goBuild(b evidence.GoBinary) string {
	parts := []string{b.GoVersion}
	if b.Module != "" {
		parts = append(parts, b.Module)
	}
	var flags []string
	if b.Stripped {
		flags = append(flags, "stripped")
	}
	if b.PIE {
		flags = append(flags, "PIE")
	}
	if b.Cgo {
		flags = append(flags, "cgo")
	}
	if b.PGO {
		flags = append(flags, "PGO")
	}
	if len(flags) > 0 {
		parts = append(parts, strings.Join(flags, ", "))
	}
	return strings.Join(parts, ", ")
}

func goRequests(e evidence.Go) string {
	if e.Requests == nil {
		return "unknown: " + e.RequestsUnknown
	}
	s := fmt.Sprintf("%d (%s", *e.Requests, e.RequestsSource)
	if e.RequestsNote != "" {
		s += ": " + e.RequestsNote
	}
	s += ")"
	if e.RequestRate != nil {
		s += fmt.Sprintf(", %.0f/s", *e.RequestRate)
	}
	if e.RequestsUncertainty > 0 {
		s += fmt.Sprintf(", ±%s", Percent(e.RequestsUncertainty))
	}
	return s
}

func goSampling(s evidence.GoSampling) string {
	var b strings.Builder
	switch s.MemProfileRate {
	case 0:
		fmt.Fprintf(&b, "off (runtime.MemProfileRate 0, %s)", s.RateSource)
	case 1:
		fmt.Fprintf(&b, "every allocation (runtime.MemProfileRate 1, %s)", s.RateSource)
	default:
		fmt.Fprintf(&b, "one per %s on average (runtime.MemProfileRate %d, %s)", Bytes(float64(s.MemProfileRate)), s.MemProfileRate, s.RateSource)
	}
	if s.RateNote != "" {
		fmt.Fprintf(&b, ": %s", s.RateNote)
	}
	fmt.Fprintf(&b, "; %d samples (%s before weighting), weighted %s", s.Samples, Bytes(float64(s.SampledBytes)), s.Weighting)
	if s.RelativeError > 0 {
		fmt.Fprintf(&b, ", totals ±%s (95 %%)", Percent(s.RelativeError))
	}
	return b.String()
}

func goGCSettings(g evidence.GoGCSettings) string {
	gogc := "off"
	if g.GOGC != nil {
		gogc = fmt.Sprint(*g.GOGC)
	}
	limit := "none"
	if g.MemoryLimit != nil {
		limit = Bytes(float64(*g.MemoryLimit))
	}
	s := fmt.Sprintf("GOGC %s (%s), GOMEMLIMIT %s", gogc, g.GOGCSource, limit)
	if g.Note != "" {
		s += "; " + g.Note
	}
	return s
}

func goSiteLabel(s evidence.GoAllocSite) string {
	name := s.Function
	if s.File != "" {
		name += fmt.Sprintf(" (%s:%d)", goShortPath(s.File), s.Line)
	}
	if s.InPoolNew {
		name += " [a sync.Pool's New: a miss]"
	}
	if s.Caller != "" {
		name += " ← " + s.Caller
	}
	return name
}

func goShortPath(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) > 2 {
		return strings.Join(parts[len(parts)-2:], "/")
	}
	return p
}

func goPoolName(p evidence.GoPool) string {
	if p.Name != "" {
		return p.Name + " (" + p.Address + ")"
	}
	return p.Address
}

func goPlusMinus(err *float64) string {
	if err == nil {
		return ""
	}
	return " ± " + Bytes(*err)
}

func goBytesPtr(v *float64) string {
	if v == nil {
		return "-"
	}
	return Bytes(*v)
}

func goFloat(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

func goDeref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// goSections are a Go program's sections of the HTML page: bytes per
// request and GC, the allocation sites as a chart and a table, the pools.
func goSections(e evidence.Go) []PageSection {
	s := PageSection{ID: "go", Title: fmt.Sprintf("Go program pid %d (%s): allocation and GC", e.PID, goBuild(e.Binary))}
	s.Notes = append(s.Notes, e.Warnings...)
	t := PageTable{Caption: "Allocation and GC", Header: []string{"measure", "value"}}
	t.Add("requests", goRequests(e))
	if e.BytesPerRequest != nil {
		t.Add("bytes per request", Bytes(*e.BytesPerRequest)+goPlusMinus(e.BytesPerRequestError))
		t.Add("objects per request", goFloat(e.ObjectsPerRequest, "%.1f"))
	} else {
		t.Add("bytes per request", "unknown: "+e.BytesPerRequestUnknown)
	}
	if e.AllocBytes != nil {
		t.Add("allocated", Bytes(*e.AllocBytes)+goPlusMinus(e.AllocBytesError))
		t.Add("allocation rate", Bytes(goDeref(e.AllocRate))+"/s")
	}
	t.Add("sampling", goSampling(e.Sampling))
	gc := fmt.Sprintf("%d (%.1f per minute)", e.GCCycles, e.GCCyclesPerMinute)
	if e.GCCyclesPerKReq != nil {
		gc += fmt.Sprintf(", %.2f per 1000 requests", *e.GCCyclesPerKReq)
	}
	t.Add("GC cycles", gc)
	t.Add("GC settings", goGCSettings(e.GC))
	s.Tables = append(s.Tables, t)
	if len(e.Sites) > 0 {
		chart := BarChart{Title: "Allocation sites", Format: Percent, Desc: "Share of the estimated bytes allocated at each site, largest first."}
		st := PageTable{Caption: "Allocation sites", Header: []string{"site", "size", "share", "bytes", "per request", "objects/req"}}
		for i, site := range e.Sites {
			if i == 15 {
				break
			}
			chart.Bars = append(chart.Bars, ChartBar{Label: shorten(site.Function, 27), Value: site.Share})
			st.Add(goSiteLabel(site), Bytes(float64(site.Size)), Percent(site.Share), Bytes(site.Bytes), goBytesPtr(site.BytesPerRequest), goFloat(site.ObjectsPerRequest, "%.2f"))
		}
		s.Charts = append(s.Charts, chart)
		s.Tables = append(s.Tables, st)
	}
	pt := PageTable{Caption: "sync.Pools", Header: []string{"pool", "gets", "puts", "misses (New)", "hit rate", "gets/req"}}
	for _, p := range e.Pools {
		hit := "unseen (no New)"
		if p.HitRate != nil {
			hit = Percent(*p.HitRate)
		}
		pt.Add(goPoolName(p), goCount(p.Gets, p.GetsError), goCount(p.Puts, p.PutsError), goCount(p.News, p.NewsError), hit, goFloat(p.GetsPerRequest, "%.2f"))
	}
	if len(pt.Rows) > 0 {
		s.Tables = append(s.Tables, pt)
	}
	if line := goPoolSampling(e.PoolSampling); line != "" {
		s.Notes = append(s.Notes, line)
	}
	if e.PoolsUnknown != "" {
		s.Notes = append(s.Notes, "sync.Pool: "+e.PoolsUnknown)
	}
	return []PageSection{s}
}

// goCount is a pool count, with its 95 % bound when it is an estimate.
func goCount(n int64, bound *float64) string {
	if bound == nil {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d ± %.0f", n, *bound)
}

// goPoolSampling says whether the pool counts are exact or estimated.
func goPoolSampling(s *evidence.GoPoolSampling) string {
	switch {
	case s == nil:
		return ""
	case s.Mode == "sampled":
		return fmt.Sprintf("pool counts estimated (± 95 %% bound): the hooks were attached %s of the window in %d stretches, not the rest — attached they cost %s of the program's CPU (%.1f µs a call), over the %s budget",
			Percent(s.OnFraction), s.Periods, Percent(s.CostShare), s.CostPerCallNs/1e3, Percent(s.BudgetShare))
	default:
		return fmt.Sprintf("pool counts exact: the hooks were attached the whole window, costing %s of the program's CPU (budget %s)", Percent(s.CostShare), Percent(s.BudgetShare))
	}
}
