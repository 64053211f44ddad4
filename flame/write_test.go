package flame

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// Every output format goes through Write, and an unknown one is an error
// that lists the formats.
func TestWriteEveryOutput(t *testing.T) {
	p := New(Samples)
	p.Add([]string{"main", "work"}, 3)
	for _, out := range Outputs {
		var b bytes.Buffer
		if err := Write(&b, p, out, Options{Title: "t"}); err != nil || b.Len() == 0 {
			t.Errorf("%s: %d bytes, %v", out, b.Len(), err)
		}
	}
	if err := Write(&bytes.Buffer{}, p, "png", Options{}); err == nil || !strings.Contains(err.Error(), "svg, html") {
		t.Errorf("png: %v", err)
	}
	d, err := NewDiff(p, p, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteDiff(&bytes.Buffer{}, d, OutputPprof, Options{}); err == nil {
		t.Error("a diff was written as pprof")
	}
	path := filepath.Join(t.TempDir(), "x.folded")
	if err := WriteFile(context.Background(), path, p, OutputFolded, Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "main;work 3\n" {
		t.Errorf("folded file = %q", b)
	}
	if out, ok := OutputOf("cpu.pb.gz"); !ok || out != OutputPprof {
		t.Errorf("OutputOf(cpu.pb.gz) = %v %v", out, ok)
	}
}

// The first frame of each stack is a synthetic root, not a function.
func TestFunctionsUnderRoot(t *testing.T) {
	p := New(Samples)
	p.Add([]string{"comm-a", "outer", "inner"}, 5)
	p.Add([]string{"comm-b", "outer", "outer"}, 2)
	p.Add([]string{"comm-b"}, 1)
	got := p.FunctionsUnderRoot(0)
	if len(got) != 2 || got[0].Name != "inner" || got[0].Self != 5 || got[1].Name != "outer" || got[1].Self != 2 || got[1].Total != 7 {
		t.Errorf("FunctionsUnderRoot = %+v", got)
	}
	if all := p.Functions(0); len(all) != 4 {
		t.Errorf("Functions = %+v, want the roots too", all)
	}
}

// An off-CPU profile counts microseconds off CPU: folded output keeps
// them as they are (bcc's offcputime -f convention), pprof writes them
// as nanoseconds under the sample type "off-cpu" (read back, the type
// stays), speedscope says microseconds and the graph prints time.
func TestOffCPUProfileInEveryFormat(t *testing.T) {
	p := New(Microseconds)
	p.SampleType = "off-cpu"
	p.Add([]string{"app", "pthread_mutex_lock", "futex_wait_k"}, 1500)
	p.Add([]string{"app", "recv"}, 250)

	var folded bytes.Buffer
	if err := Write(&folded, p, OutputFolded, Options{}); err != nil {
		t.Fatal(err)
	}
	if folded.String() != "app;pthread_mutex_lock;futex_wait_k 1500\napp;recv 250\n" {
		t.Errorf("folded = %q", folded.String())
	}

	var pb bytes.Buffer
	if err := Write(&pb, p, OutputPprof, Options{}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPprof(bytes.NewReader(pb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if back.Unit != Nanoseconds || back.SampleType != "off-cpu" || back.Total() != 1750*1000 {
		t.Errorf("pprof read back: unit %s, type %q, total %d", back.Unit, back.SampleType, back.Total())
	}
	var again bytes.Buffer
	if err := WritePprof(&again, back); err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(bytes.NewReader(again.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if st := pp.SampleType[0]; st.Type != "off-cpu" || st.Unit != "nanoseconds" {
		t.Errorf("pprof sample type %s/%s, want off-cpu/nanoseconds", st.Type, st.Unit)
	}

	var ss bytes.Buffer
	if err := Write(&ss, p, OutputSpeedscope, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ss.String(), `"unit":"microseconds"`) {
		t.Errorf("speedscope without the microseconds unit: %.300s", ss.String())
	}
	var svg bytes.Buffer
	if err := Write(&svg, p, OutputSVG, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "1.75 ms") {
		t.Errorf("the SVG does not print the total as 1.75 ms")
	}
	if u, err := ParseUnit("microseconds"); err != nil || u != Microseconds {
		t.Errorf("ParseUnit(microseconds) = %v, %v", u, err)
	}
}
