package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// The HTML page (-o html) is one self-contained file drawn from the same
// Report the JSON is written from: a header (where, when, perfscope's own
// cost and how each section's numbers were obtained), the findings with
// their evidence and commands, one section per kind of data with SVG
// charts and the tables behind them, the flame graphs embedded, and the
// command's text report as the last, complete text alternative. CSS and
// script are inlined; nothing is fetched when it is opened.

var (
	//go:embed html/page.tmpl
	pageTemplateText string
	//go:embed html/page.css
	pageCSS string
	//go:embed html/page.js
	pageJS string
)

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"upper": strings.ToUpper,
	"join":  strings.Join,
}).Parse(pageTemplateText))

// PageSection is one section of the HTML page: charts, the tables with
// their numbers and notes. Data from floors above report (the comparison
// of two runs, the GC log) supplies its own through PageSectioner.
type PageSection struct {
	// ID is the section's element id (letters, digits and dashes).
	ID     string
	Title  string
	Notes  []string
	Charts []Chart
	Tables []PageTable
	// Pairs lays the charts out two abreast (small charts compared side
	// by side).
	Pairs bool
}

// PageTable is a table of a page section: the text alternative of its
// charts, or numbers that are read rather than seen.
type PageTable struct {
	Caption string
	Header  []string
	Rows    [][]string
}

// Add appends a row.
func (t *PageTable) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// PageSectioner is report data that lays out its own page sections.
type PageSectioner interface {
	PageSections() []PageSection
}

// FlameSet is one of a run's stack sets drawn on the HTML page as an
// interactive flame graph (the CPUs running NET_RX, the other CPUs).
type FlameSet struct {
	Title   string
	Profile *flame.Profile
}

type pageRow struct{ Name, Value string }

type pageFinding struct {
	diagnose.Finding
	Rank     int
	Severity string
}

type pageSectionView struct {
	ID, Title string
	Pairs     bool
	Notes     []string
	Charts    []template.HTML
	Tables    []PageTable
}

type pageFlame struct {
	ID, Title string
	// Srcdoc is the flame graph's own page as the iframe's srcdoc
	// attribute: its script and ids stay apart from the page's and from
	// each other.
	Srcdoc template.HTMLAttr
}

// srcdocAttr is doc as a single-quoted srcdoc attribute. Inside a quoted
// attribute only its quote and & need escaping; html/template would also
// escape every < > and " of the flame graph's markup, half as much again
// as the graph itself (1.0 MB → 1.5 MB for a 10 s udp run).
func srcdocAttr(doc string) template.HTMLAttr {
	return template.HTMLAttr("srcdoc='" + strings.NewReplacer("&", "&amp;", "'", "&#39;").Replace(doc) + "'")
}

type pageView struct {
	Title    string
	Header   []pageRow
	Obtained []pageRow
	Cost     []pageRow
	CostText string
	Findings []pageFinding
	Sections []pageSectionView
	Flames   []pageFlame
	Text     string
	CSS      template.CSS
	JS       template.JS
}

// writePage draws r as the HTML page.
func writePage(w io.Writer, r *Report) error {
	v := pageView{Title: "perfscope " + r.Command, CSS: template.CSS(pageCSS), JS: template.JS(pageJS)}
	if r.Recipe != nil && r.Command == "recipe" {
		v.Title = "perfscope recipe run " + r.Recipe.Name
	}
	v.Header = pageHeader(r)
	v.Obtained = obtained(r.Data)
	v.Cost, v.CostText = pageCost(r.Overhead)
	for i, f := range r.Findings {
		v.Findings = append(v.Findings, pageFinding{Finding: f, Rank: i + 1, Severity: f.Severity.String()})
	}
	seq := &chartSeq{}
	for _, s := range pageSections(r) {
		sv := pageSectionView{ID: s.ID, Title: s.Title, Notes: s.Notes, Tables: s.Tables, Pairs: s.Pairs}
		for _, c := range s.Charts {
			sv.Charts = append(sv.Charts, c.svg(seq))
		}
		v.Sections = append(v.Sections, sv)
	}
	flames, err := pageFlames(r)
	if err != nil {
		return err
	}
	v.Flames = flames
	var text bytes.Buffer
	if err := writeText(TerminalSafe(&text), r); err == nil {
		v.Text = text.String()
	}
	return pageTemplate.Execute(w, v)
}

func pageHeader(r *Report) []pageRow {
	m := r.Meta
	rows := []pageRow{
		{"command", "perfscope " + r.Command},
		{"host", m.Host},
		{"kernel", m.Kernel},
		{"CPUs", fmt.Sprint(m.CPUs)},
		{"started", m.Started.UTC().Format(time.RFC3339)},
		{"duration", Nanos(float64(m.DurationNs))},
		{"perfscope", m.Version},
	}
	if rc := r.Recipe; rc != nil {
		var params []string
		for k, v := range rc.Parameters {
			params = append(params, k+"="+v)
		}
		sort.Strings(params)
		rows = append(rows, pageRow{"recipe", rc.Name + " (" + rc.Source + ") " + strings.Join(params, " ")})
	}
	for _, a := range r.Artifacts {
		rows = append(rows, pageRow{a.Kind, a.Path})
	}
	return rows
}

// pageCost is perfscope's own cost: the headline figures, and the text
// section with every program's share.
func pageCost(ov *evidence.Overhead) ([]pageRow, string) {
	if ov == nil {
		return nil, ""
	}
	var rows []pageRow
	if ov.AttachMethod != "" {
		rows = append(rows, pageRow{"attached with", fmt.Sprintf("%s in %s", ov.AttachMethod, Nanos(float64(ov.AttachNs)))})
	}
	rows = append(rows, pageRow{"BPF time (overhead.bpf_time_share)", Percent(ov.BPFTimeShare) + " of all CPU time"})
	if c := ov.CPUCost; c != nil {
		rows = append(rows, pageRow{"busiest CPU (overhead.cpu_cost)", fmt.Sprintf("cpu%d %s, all CPUs %s (estimate: runs × cost per run)", c.MaxCPU, Percent(c.MaxShare), Percent(c.Share))})
	}
	if b := ov.Budget; b != nil {
		rows = append(rows, pageRow{"overhead budget (overhead.budget)", Percent(b.CPUShare) + " of any one CPU"})
	} else {
		rows = append(rows, pageRow{"overhead budget", "none (--exact): every event counted"})
	}
	if ov.ProcessCPUNs > 0 {
		rows = append(rows, pageRow{"perfscope's process (overhead.process_cpu_ns)", fmt.Sprintf("%s CPU over the window (%s of all CPU time)", Nanos(float64(ov.ProcessCPUNs)), Percent(ov.ProcessCPUShare))})
	}
	if ov.RunCPUNs > 0 {
		rows = append(rows, pageRow{"whole run (overhead.run_cpu_ns)", fmt.Sprintf("%s CPU in %s (%s of one CPU)", Nanos(float64(ov.RunCPUNs)), Nanos(float64(ov.RunNs)), Percent(ov.RunCPUShare))})
	}
	lost := fmt.Sprint(ov.EventsLost)
	if missed := missedRuns(ov.Programs); missed != "" {
		lost += " (programs skipped by the kernel while another tracing program ran on the CPU: " + missed + ")"
	}
	rows = append(rows, pageRow{"events lost (overhead.events_lost)", lost})
	var b bytes.Buffer
	writeOverhead(TerminalSafe(&b), ov)
	return rows, b.String()
}

// obtained says, per section of the data, whether its numbers were
// counted exactly or scaled from sampling windows, with the bound.
func obtained(data any) []pageRow {
	how := func(e *evidence.Estimate) string {
		if e == nil {
			return "exact: every event in the window counted"
		}
		return e.String()
	}
	var rows []pageRow
	add := func(name string, e *evidence.Estimate) { rows = append(rows, pageRow{name, how(e)}) }
	net := func(prefix string, ev evidence.NetEvidence) {
		add(prefix+"softirq", ev.Softirq.Estimate)
		add(prefix+"queues", ev.Queues.Estimate)
		add(prefix+"queue → CPU", ev.QueueCPU.Estimate)
		add(prefix+"TX", ev.TX.Estimate)
		add(prefix+"locks", ev.Locks.Estimate)
		add(prefix+"drops", ev.Drops.Estimate)
		add(prefix+"sockets", ev.Sockets.Estimate)
	}
	switch d := data.(type) {
	case NetData:
		net("", d.NetEvidence)
	case evidence.SoftirqEvidence:
		add("softirq", d.Estimate)
	case evidence.LockSection:
		add("locks", d.Estimate)
	case evidence.OffCPU:
		add("off-CPU", d.Coverage)
	case RecipeData:
		if d.Net != nil {
			net("net: ", d.Net.NetEvidence)
		}
		if d.Softirq != nil {
			add("softirq", d.Softirq.Estimate)
		}
		if d.Locks != nil {
			add("locks", d.Locks.Estimate)
		}
		if d.OffCPU != nil {
			add("off-CPU", d.OffCPU.Coverage)
		}
	}
	return rows
}

// pageFlames draws the run's stacks as the flame graph's own HTML page,
// one per stack set.
func pageFlames(r *Report) ([]pageFlame, error) {
	var out []pageFlame
	draw := func(title string, write func(io.Writer) error) error {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return fmt.Errorf("flame graph %q: %w", title, err)
		}
		out = append(out, pageFlame{ID: fmt.Sprintf("flame%d", len(out)+1), Title: title, Srcdoc: srcdocAttr(b.String())})
		return nil
	}
	opts := r.Show.FlameOptions()
	for _, s := range r.FlameSets {
		if s.Profile == nil || s.Profile.Total() == 0 {
			continue
		}
		o := opts
		o.Title = s.Title
		p := s.Profile
		if err := draw(s.Title, func(w io.Writer) error { return flame.WriteHTML(w, p, o) }); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 && r.Flame != nil && r.Flame.Total() > 0 {
		title := opts.Title
		if title == "" {
			title = "on-CPU stacks"
		}
		if err := draw(title, func(w io.Writer) error { return flame.WriteHTML(w, r.Flame, opts) }); err != nil {
			return nil, err
		}
	}
	if r.FlameDiff != nil {
		if err := draw("differential flame graph", func(w io.Writer) error { return flame.WriteDiffHTML(w, r.FlameDiff, opts) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}
