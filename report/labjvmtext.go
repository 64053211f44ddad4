package report

import (
	"fmt"
	"io"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/diagnose"
)

// LabJVMScenario is one endpoint's row of the table.
type LabJVMScenario struct {
	Endpoint string             `json:"endpoint"`
	Load     httpload.Result    `json:"load"`
	Data     JVMData            `json:"measurement"`
	Findings []diagnose.Finding `json:"findings"`
}

// LabJVMData is the data of `perfscope lab jvm`: one measurement per
// endpoint and the extra allocation measured against --kb.
type LabJVMData struct {
	Scenarios []LabJVMScenario `json:"scenarios"`
	// ExtraBytesExpected is --kb in bytes; ExtraBytesMeasured the
	// difference in bytes per request between /alloc?kb=KB and
	// /alloc?kb=0; ExtraError their relative difference.
	ExtraBytesExpected float64 `json:"extra_bytes_expected"`
	ExtraBytesMeasured float64 `json:"extra_bytes_measured"`
	ExtraError         float64 `json:"extra_error"`
	// Run is how the lab ran, for the text; not part of the JSON.
	Run LabJVMRun `json:"-"`
}

// Findings are every scenario's findings, ranked.
func (d LabJVMData) Findings() []diagnose.Finding {
	var fs []diagnose.Finding
	for _, s := range d.Scenarios {
		fs = append(fs, s.Findings...)
	}
	diagnose.Rank(fs)
	return fs
}

// LabJVMRun is how `perfscope lab jvm` ran: its flags.
type LabJVMRun struct {
	Heap                      string
	Requests, Concurrency, KB int
	TargetRPS                 float64
}

// WriteText implements Texter: the table of bytes per request and young
// GCs per endpoint, and the measured extra allocation against --kb.
func (d LabJVMData) WriteText(w io.Writer, _ *Report) error {
	writeLabJVMText(w, d.Run, d)
	return nil
}

func writeLabJVMText(w io.Writer, o LabJVMRun, d LabJVMData) {
	fmt.Fprintf(w, "Sample service, G1, -Xmx%s; %d requests per endpoint, %d connections\n", o.Heap, o.Requests, o.Concurrency)
	Heading(w, fmt.Sprintf("Bytes per request and young GCs at %.0f requests/s (the allocation → young-GC model)", o.TargetRPS))
	t := Table{Header: []string{"endpoint", "req/s", "p99", "per request", "per request (Eden)", "logging/request", "Eden", "young GCs/min", "Eden for 1 GC/10s"}}
	for _, s := range d.Scenarios {
		e, m := s.Data.JVM, s.Data.Model
		if m == nil {
			m = &diagnose.YoungGCPrediction{}
		}
		logging := "-"
		if e.Logging.BytesPerRequest > 0 {
			logging = Bytes(e.Logging.BytesPerRequest)
		}
		perReq, _ := e.PerRequest()
		t.Add(s.Endpoint, fmt.Sprintf("%.0f", s.Load.RPS), Nanos(float64(s.Load.P99Ns)), Bytes(perReq), Bytes(deref(e.BytesPerRequestEden)),
			logging, Bytes(float64(e.EdenCapacity)), fmt.Sprintf("%.1f", m.YoungGCsPerMinute), Bytes(m.EdenForTarget))
	}
	t.Write(w)
	fmt.Fprintf(w, "\n/alloc?kb=%d minus /alloc?kb=0: %s per request (expected %s, error %s)\n", o.KB,
		Bytes(d.ExtraBytesMeasured), Bytes(d.ExtraBytesExpected), Percent(d.ExtraError))
	if len(d.Scenarios) > 2 {
		l := d.Scenarios[2].Data.Logging
		fmt.Fprintf(w, "/log: logging costs %s per request (%s of its allocation)\n", Bytes(l.BytesPerRequest), Percent(l.Share))
	}
}

// PageSections are each endpoint's JVM section, titled by the endpoint.
func (d LabJVMData) PageSections() []PageSection {
	var out []PageSection
	for i, s := range d.Scenarios {
		sec := JVMSection(s.Data.JVM)
		sec.ID = fmt.Sprintf("jvm-%d", i+1)
		sec.Title = s.Endpoint + ": " + sec.Title
		out = append(out, sec)
	}
	return out
}
