package flame

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func mustFolded(t *testing.T, s string) *Profile {
	t.Helper()
	p, err := ReadFolded(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ReadFolded: %v", err)
	}
	return p
}

func folded(t *testing.T, p *Profile) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteFolded(&b, p); err != nil {
		t.Fatalf("WriteFolded: %v", err)
	}
	return b.String()
}

func TestReadFolded(t *testing.T) {
	tests := []struct {
		name, in, want string
		total          int64
	}{
		{"merges and sorts", "b;c 2\na;b 1\nb;c 3\n", "a;b 1\nb;c 5\n", 6},
		{"inner stacks keep self", "a 4\na;b 1\n", "a 4\na;b 1\n", 5},
		{"frames with spaces, CRLF", "main;operator new(unsigned long) 7\r\n\n[thread one];run 1\n", "[thread one];run 1\nmain;operator new(unsigned long) 7\n", 8},
		{"zero values ignored", "a;b 0\nc 1\n", "c 1\n", 1},
		{"fractional rounded", "a 1.6\n", "a 2\n", 2},
		{"a frame named all is not the root", "all;x 1\n", "all;x 1\n", 1},
		{"empty input", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustFolded(t, tt.in)
			if got := folded(t, p); got != tt.want {
				t.Errorf("folded = %q, want %q", got, tt.want)
			}
			if p.Total() != tt.total {
				t.Errorf("Total = %d, want %d", p.Total(), tt.total)
			}
		})
	}
}

func TestReadFoldedErrors(t *testing.T) {
	for _, in := range []string{"a;b\n", "a;b 1\nnot a stack x\n", "a -3\n"} {
		if _, err := ReadFolded(strings.NewReader(in)); err == nil {
			t.Errorf("ReadFolded(%q) succeeded, want an error", in)
		}
	}
	_, err := ReadFolded(strings.NewReader("a 1\nb 2\nbroken\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %v does not name line 3", err)
	}
}

func TestFoldedLongLine(t *testing.T) {
	// Longer than the reader's buffer: assembled, not split.
	frames := make([]string, 60000)
	for i := range frames {
		frames[i] = "f" + strconv.Itoa(i)
	}
	in := strings.Join(frames, ";") + " 3\n"
	p := mustFolded(t, in)
	if got := folded(t, p); got != in {
		t.Errorf("long line not read back intact (len %d vs %d)", len(got), len(in))
	}
}

const sample = `main;net/http.(*conn).serve;runtime.mallocgc 30
main;net/http.(*conn).serve;encoding/json.Marshal 20
main;do_syscall_64_[k];tcp_sendmsg_[k] 25
java/lang/Thread.run_[j];com/ex/Handler.handle_[j];com/ex/Codec.enc_[i] 15
java/lang/Thread.run_[j];Interpreter_[0] 9
main;tiny 1
`

func TestFoldedPprofRoundTrip(t *testing.T) {
	for _, unit := range []Unit{Samples, Nanoseconds, Bytes} {
		p := mustFolded(t, sample)
		p.Unit = unit
		var buf bytes.Buffer
		if err := WritePprof(&buf, p); err != nil {
			t.Fatalf("WritePprof: %v", err)
		}
		q, err := ReadPprof(&buf)
		if err != nil {
			t.Fatalf("ReadPprof: %v", err)
		}
		if q.Unit != unit {
			t.Errorf("unit %s came back as %s", unit, q.Unit)
		}
		if got, want := folded(t, q), folded(t, p); got != want {
			t.Errorf("%s: folded → pprof → folded changed the stacks:\n got %q\nwant %q", unit, got, want)
		}
	}
}

// svgFrame is one <g> of the frames group.
type svgFrame struct {
	Title string `xml:"title"`
	Rect  struct {
		X     float64 `xml:"x,attr"`
		Y     float64 `xml:"y,attr"`
		Width float64 `xml:"width,attr"`
		Fill  string  `xml:"fill,attr"`
	} `xml:"rect"`
	Text string `xml:"text"`
}

type svgDoc struct {
	Width  float64 `xml:"width,attr"`
	Script string  `xml:"script"`
	Texts  []struct {
		ID   string `xml:"id,attr"`
		Body string `xml:",chardata"`
	} `xml:"text"`
	Groups []struct {
		ID     string     `xml:"id,attr"`
		Frames []svgFrame `xml:"g"`
	} `xml:"g"`
}

func parseSVG(t *testing.T, b []byte) (svgDoc, map[string]svgFrame) {
	t.Helper()
	var doc svgDoc
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("SVG is not well-formed XML: %v", err)
	}
	frames := map[string]svgFrame{}
	for _, g := range doc.Groups {
		if g.ID != "frames" {
			continue
		}
		for _, f := range g.Frames {
			name := f.Title[:strings.LastIndex(f.Title, " (")]
			frames[name] = f
		}
	}
	if len(frames) == 0 {
		t.Fatal("SVG has no frames")
	}
	return doc, frames
}

func TestWriteSVG(t *testing.T) {
	p := mustFolded(t, sample+"main;<script>&\"quoted\" 0\nmain;a<b>&c 100\n")
	var b bytes.Buffer
	const width = 1000
	if err := WriteSVG(&b, p, Options{Title: "T <1>", Width: width, MinWidth: 2}); err != nil {
		t.Fatal(err)
	}
	doc, frames := parseSVG(t, b.Bytes())
	if doc.Width != width {
		t.Errorf("width %v, want %d", doc.Width, width)
	}
	total := float64(p.Total())
	scale := (width - 2*xpad) / total
	for name, value := range map[string]float64{
		"all": total, "main": 176, "net/http.(*conn).serve": 50, "tcp_sendmsg_[k]": 25,
		"com/ex/Codec.enc_[i]": 15, "a<b>&c": 100,
	} {
		f, ok := frames[name]
		if !ok {
			t.Errorf("frame %q missing", name)
			continue
		}
		if math.Abs(f.Rect.Width-value*scale) > 0.01 {
			t.Errorf("%s: width %.2f, want %.2f", name, f.Rect.Width, value*scale)
		}
		pct := strconv.FormatFloat(100*value/total, 'f', 2, 64) + "%"
		if !strings.Contains(f.Title, strconv.FormatFloat(value, 'f', 0, 64)+" samples, "+pct) {
			t.Errorf("%s: title %q lacks value and %s", name, f.Title, pct)
		}
	}
	// 1 sample of 201 is 4.9 px wide at 1000 px: kept at minwidth 2...
	if _, ok := frames["tiny"]; !ok {
		t.Error("frame tiny (4.9 px) pruned at minwidth 2")
	}
	// ...and pruned at minwidth 5.
	b.Reset()
	if err := WriteSVG(&b, p, Options{Width: width, MinWidth: 5}); err != nil {
		t.Fatal(err)
	}
	if _, frames := parseSVG(t, b.Bytes()); frames["tiny"].Title != "" {
		t.Error("frame tiny (4.9 px) drawn at minwidth 5")
	}
	// Siblings are ordered by name and do not overlap.
	enc, mal := frames["encoding/json.Marshal"], frames["runtime.mallocgc"]
	if !(enc.Rect.X+enc.Rect.Width <= mal.Rect.X+0.01) {
		t.Errorf("encoding/json.Marshal [%v+%v] not left of runtime.mallocgc [%v]", enc.Rect.X, enc.Rect.Width, mal.Rect.X)
	}
	// Flame: children above parents.
	if !(frames["net/http.(*conn).serve"].Rect.Y < frames["main"].Rect.Y) {
		t.Error("callee not drawn above caller")
	}
	// Colours by kind.
	if k, j := frames["tcp_sendmsg_[k]"].Rect.Fill, frames["com/ex/Handler.handle_[j]"].Rect.Fill; k == j {
		t.Errorf("kernel and JIT frames share colour %s", k)
	}
	for _, want := range []string{"flameSearch", "flameZoom", "flameReset", "Matched: "} {
		if !strings.Contains(doc.Script, want) {
			t.Errorf("script lacks %s", want)
		}
	}
	ids := map[string]bool{}
	for _, tx := range doc.Texts {
		ids[tx.ID] = true
		if tx.ID == "title" && tx.Body != "T <1>" {
			t.Errorf("title %q", tx.Body)
		}
	}
	for _, id := range []string{"title", "details", "matched", "unzoom", "search"} {
		if !ids[id] {
			t.Errorf("SVG lacks the %s control", id)
		}
	}
	assertSelfContained(t, b.String())
}

// assertSelfContained fails on anything a browser would fetch.
func assertSelfContained(t *testing.T, doc string) {
	t.Helper()
	for _, bad := range []string{"<script src", "href=", "@import", "url(http"} {
		if strings.Contains(doc, bad) {
			t.Errorf("output loads external resources (%s)", bad)
		}
	}
}

func TestWriteSVGIcicle(t *testing.T) {
	p := mustFolded(t, sample)
	var b bytes.Buffer
	if err := WriteSVG(&b, p, Options{Reverse: true}); err != nil {
		t.Fatal(err)
	}
	_, frames := parseSVG(t, b.Bytes())
	if !(frames["all"].Rect.Y < frames["main"].Rect.Y) {
		t.Error("icicle: root not drawn above its callees")
	}
}

func TestWriteSVGEmptyProfile(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, New(Samples), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(svgDoc)); err != nil {
		t.Fatalf("empty profile's SVG is not well-formed: %v", err)
	}
}

func TestWriteHTML(t *testing.T) {
	p := mustFolded(t, sample)
	var b bytes.Buffer
	if err := WriteHTML(&b, p, Options{Title: "a & b"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<!DOCTYPE html>", "<title>a &amp; b</title>", `id="icicle"`, `id="search-input"`, `id="reset-zoom"`, "flameSetIcicle", "flameInit("} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
	start, end := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	if start < 0 || end < start {
		t.Fatal("HTML has no inline SVG")
	}
	_, frames := parseSVG(t, []byte(page[start:end+len("</svg>")]))
	if f := frames["runtime.mallocgc"]; f.Title == "" {
		t.Error("HTML graph lacks runtime.mallocgc")
	}
	assertSelfContained(t, page)
}

func TestSpeedscope(t *testing.T) {
	p := mustFolded(t, "a;b 3\na;c 2\na 1\n")
	var b bytes.Buffer
	if err := WriteSpeedscope(&b, p, Options{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	var f speedscopeFile
	if err := json.Unmarshal(b.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Profiles) != 1 || f.Profiles[0].EndValue != 6 {
		t.Fatalf("profiles %+v", f.Profiles)
	}
	got := map[string]int64{}
	for i, s := range f.Profiles[0].Samples {
		var names []string
		for _, fi := range s {
			names = append(names, f.Shared.Frames[fi].Name)
		}
		got[strings.Join(names, ";")] += f.Profiles[0].Weights[i]
	}
	want := map[string]int64{"a;b": 3, "a;c": 2, "a": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("stack %s weight %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

func TestDiff(t *testing.T) {
	before := mustFolded(t, "a;b 10\na;c 10\nx 0\n")
	after := mustFolded(t, "a;b 30\na;c 10\na;d 40\n")
	d, err := NewDiff(before, after, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Before is scaled by 80/20 = 4 to after's total.
	tests := []struct {
		stack         string
		before, after float64
	}{
		{"a", 80, 80},
		{"a;b", 40, 30},
		{"a;c", 40, 10},
		{"a;d", 0, 40},
	}
	for _, tt := range tests {
		b, a, ok := d.Delta(strings.Split(tt.stack, ";"))
		if !ok || b != tt.before || a != tt.after {
			t.Errorf("%s: before %v after %v ok %v, want %v %v", tt.stack, b, a, ok, tt.before, tt.after)
		}
	}
	abs, _ := NewDiff(before, after, DiffOptions{Absolute: true})
	if b, a, _ := abs.Delta([]string{"a", "b"}); b != 10 || a != 30 {
		t.Errorf("absolute a;b: %v → %v, want 10 → 30", b, a)
	}
	// In the shape of "before", a;d does not exist; values scale to 20.
	rev, _ := NewDiff(before, after, DiffOptions{Shape: ShapeBefore})
	if _, _, ok := rev.Delta([]string{"a", "d"}); ok {
		t.Error("a;d drawn in the shape of before")
	}
	if b, a, _ := rev.Delta([]string{"a", "c"}); b != 10 || a != 2.5 {
		t.Errorf("before-shaped a;c: %v → %v, want 10 → 2.5", b, a)
	}

	var svg bytes.Buffer
	if err := WriteDiffSVG(&svg, d, Options{}); err != nil {
		t.Fatal(err)
	}
	_, frames := parseSVG(t, svg.Bytes())
	red, blue := frames["d"].Rect.Fill, frames["c"].Rect.Fill
	if !strings.HasPrefix(red, "rgb(255,") {
		t.Errorf("grown frame d is %s, want red", red)
	}
	if !strings.HasSuffix(blue, ",255)") || strings.HasPrefix(blue, "rgb(255,") {
		t.Errorf("shrunk frame c is %s, want blue", blue)
	}
	if !strings.Contains(frames["c"].Title, "before 40 samples normalised; change -37.50% of total") {
		t.Errorf("c title %q", frames["c"].Title)
	}
	if unchanged := frames["a"].Rect.Fill; unchanged != "rgb(250,250,250)" {
		t.Errorf("unchanged frame a is %s, want white", unchanged)
	}

	var page bytes.Buffer
	if err := WriteDiffHTML(&page, d, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "rgb(255,") || !strings.Contains(page.String(), `"diff":true`) {
		t.Error("diff HTML lacks red frames or the diff flag")
	}

	var df bytes.Buffer
	if err := WriteDiffFolded(&df, d); err != nil {
		t.Fatal(err)
	}
	if got, want := df.String(), "a;b 10 30\na;c 10 10\na;d 0 40\n"; got != want {
		t.Errorf("difffolded %q, want %q", got, want)
	}
	ch := d.Changes(0)
	if len(ch) != 3 || ch[0].Name != "d" || ch[0].Delta != 40 || ch[1].Name != "c" || ch[1].Delta != -30 {
		t.Errorf("changes %+v", ch)
	}

	if _, err := NewDiff(New(Bytes), after, DiffOptions{}); err == nil {
		t.Error("diff of bytes against samples accepted")
	}
}

func TestFilter(t *testing.T) {
	p := mustFolded(t, sample)
	tests := []struct {
		name             string
		include, exclude string
		want             string
	}{
		{"include", `_\[k\]$`, "", "main;do_syscall_64_[k];tcp_sendmsg_[k] 25\n"},
		{"exclude", "", `^main$`, "java/lang/Thread.run_[j];Interpreter_[0] 9\njava/lang/Thread.run_[j];com/ex/Handler.handle_[j];com/ex/Codec.enc_[i] 15\n"},
		{"exclude wins", `Thread`, `Interpreter`, "java/lang/Thread.run_[j];com/ex/Handler.handle_[j];com/ex/Codec.enc_[i] 15\n"},
		{"include matches a leaf only", `^tiny$`, "", "main;tiny 1\n"},
		{"nothing matches", `nope`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f Filter
			if tt.include != "" {
				f.Include = regexp.MustCompile(tt.include)
			}
			if tt.exclude != "" {
				f.Exclude = regexp.MustCompile(tt.exclude)
			}
			if got := folded(t, p.Filter(f)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got, want := folded(t, p.Filter(Filter{})), folded(t, p); got != want {
		t.Error("empty filter changed the profile")
	}
}

func TestMerge(t *testing.T) {
	p := mustFolded(t, "a;b 1\n")
	if err := p.Merge(mustFolded(t, "a;b 2\na;c 3\n")); err != nil {
		t.Fatal(err)
	}
	if got := folded(t, p); got != "a;b 3\na;c 3\n" {
		t.Errorf("merged %q", got)
	}
	if err := p.Merge(New(Nanoseconds)); err == nil {
		t.Error("merged nanoseconds into samples")
	}
}

func TestReadPerfScript(t *testing.T) {
	f, err := os.Open("testdata/perf-script.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		roots RootFrames
		want  string
	}{
		{RootFrames{}, `main;[libxul.so] 1
secondary_startup_64_no_verify_[k];do_idle_[k];default_idle_[k] 1
start_thread;Interpreter;Lcom/example/Sender;::send_[j];__libc_send;entry_SYSCALL_64_after_hwframe_[k];tcp_sendmsg_[k];tcp_sendmsg_locked_[k] 1
start_thread;Interpreter;Lcom/example/Sender;::send_[j];__libc_send;entry_SYSCALL_64_after_hwframe_[k];tcp_sendmsg_[k];tcp_sendmsg_locked_[k];copy_user_enhanced_fast_string_[k] 1
`},
		{RootFrames{Process: true, CPU: true}, `[cpu 0];Web Content-5001;main;[libxul.so] 1
[cpu 0];swapper-0;secondary_startup_64_no_verify_[k];do_idle_[k];default_idle_[k] 1
[cpu 1];java-4242;start_thread;Interpreter;Lcom/example/Sender;::send_[j];__libc_send;entry_SYSCALL_64_after_hwframe_[k];tcp_sendmsg_[k];tcp_sendmsg_locked_[k] 1
[cpu 1];java-4242;start_thread;Interpreter;Lcom/example/Sender;::send_[j];__libc_send;entry_SYSCALL_64_after_hwframe_[k];tcp_sendmsg_[k];tcp_sendmsg_locked_[k];copy_user_enhanced_fast_string_[k] 1
`},
		{RootFrames{Thread: true}, "java-4242/4250;"},
	}
	for _, tt := range tests {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		p, err := ReadPerfScript(f, tt.roots)
		if err != nil {
			t.Fatalf("ReadPerfScript: %v", err)
		}
		got := folded(t, p)
		if !strings.Contains(got, tt.want) {
			t.Errorf("roots %+v:\n got %s\nwant %s", tt.roots, got, tt.want)
		}
	}
}

func TestReadPerfScriptErrors(t *testing.T) {
	for _, in := range []string{"", "java 1/1 [000] 1.0: cpu-clock:\n\tzzz foo (bar)\n"} {
		if _, err := ReadPerfScript(strings.NewReader(in), RootFrames{}); err == nil {
			t.Errorf("ReadPerfScript(%q) succeeded", in)
		}
	}
}

func TestReadDetectsFormat(t *testing.T) {
	perf, err := os.ReadFile("testdata/perf-script.txt")
	if err != nil {
		t.Fatal(err)
	}
	var pprofBuf bytes.Buffer
	if err := WritePprof(&pprofBuf, mustFolded(t, sample)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want Format
	}{
		{"folded", []byte(sample), FormatFolded},
		{"perf script", perf, FormatPerfScript},
		{"pprof (gzipped)", pprofBuf.Bytes(), FormatPprof},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, got, err := Read(bytes.NewReader(tt.in), FormatAuto, RootFrames{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("detected %s, want %s", got, tt.want)
			}
			if p.Total() == 0 {
				t.Error("empty profile")
			}
		})
	}
	if _, _, err := Read(strings.NewReader("hello world\n"), FormatAuto, RootFrames{}); err == nil {
		t.Error("plain text accepted as a profile")
	}
}

func TestKindOf(t *testing.T) {
	tests := map[string]Kind{
		"tcp_sendmsg_[k]":                     KindKernel,
		"com/ex/Handler.handle_[j]":           KindJIT,
		"com/ex/Codec.enc_[i]":                KindInlined,
		"Interpreter_[0]":                     KindInterpreted,
		"java/util/HashMap.get":               KindJIT,
		"com.example.Foo.bar":                 KindJIT,
		"runtime.mallocgc":                    KindGo,
		"net/http.(*conn).serve":              KindGo,
		"github.com/a/b.(*T).M":               KindGo,
		"main.main":                           KindGo,
		"std::vector<int>::push_back":         KindNative,
		"operator new(unsigned long)":         KindNative,
		"start_thread":                        KindNative,
		"[unknown]":                           KindOther,
		"[cpu 3]":                             KindOther,
		"libc.so.6":                           KindNative,
		"Lcom/example/Sender;::send":          KindNative,
		"sync.(*Mutex).Lock":                  KindGo,
		"trailing.":                           KindNative,
		".leading":                            KindNative,
		"org.apache.kafka.Producer.send_[j]":  KindJIT,
		"org.apache.kafka.Producer.send_[0]":  KindInterpreted,
		"org.apache.kafka.Producer.send_[zz]": KindJIT,
	}
	for name, want := range tests {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", name, got, want)
		}
	}
	// Stable per name, different between names of one kind.
	if frameColour("runtime.mallocgc") != frameColour("runtime.mallocgc") {
		t.Error("colour not stable")
	}
	if frameColour("runtime.mallocgc") == frameColour("runtime.growslice") {
		t.Error("two functions share a colour")
	}
}

func TestFunctions(t *testing.T) {
	p := mustFolded(t, "a;b;a;c 4\na;b 2\nd 1\n")
	got := p.Functions(0)
	want := []FunctionCost{
		{"c", "native", 4, 4}, {"b", "native", 2, 6}, {"d", "native", 1, 1}, {"a", "native", 0, 6},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
