package flame

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"strings"
	"testing"
)

// jsHarness runs the graph's script in node against a minimal DOM built
// from the SVG's frames, then zooms, searches, resets and flips to an
// icicle, and reports what the frames look like after each step.
const jsHarness = `
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
function el(attrs, text) {
	return {
		attrs: Object.assign({}, attrs), textContent: text || "", style: {}, children: [],
		cls: new Set(),
		getAttribute(k) { return this.attrs[k]; },
		setAttribute(k, v) { this.attrs[k] = String(v); },
		get classList() { const c = this.cls; return { add: x => c.add(x), remove: x => c.delete(x), toggle: (x, on) => on ? c.add(x) : c.delete(x) }; },
	};
}
const byId = {};
for (const id of ["details", "matched", "unzoom", "search"]) byId[id] = el({}, " ");
const framesGroup = el({});
const root = el({});
root.querySelector = sel => sel === "#frames" ? framesGroup : byId[sel.slice(1)];
root.addEventListener = () => {};
for (const f of input.frames) {
	const g = el({});
	const rect = el({x: f.x, y: f.y, width: f.width, fill: f.fill});
	const text = el({x: f.x + 3}, f.text);
	const title = el({}, f.title);
	g.querySelector = s => ({rect, text, title})[s];
	g.parentNode = framesGroup;
	framesGroup.children.push(g);
}
global.window = { addEventListener() {} };
global.prompt = () => null;
eval("var flameConfig = " + JSON.stringify(input.config) + ";\n" + input.script + "\nglobal.api = {flameInit, flameZoom, flameReset, flameSearch, flameSetIcicle, frames: () => flameFrames};");
const snap = () => Object.fromEntries(api.frames().map(f => [f.name, {
	x: +f.rect.attrs.x, y: +f.rect.attrs.y, w: +f.rect.attrs.width, hidden: f.g.style.display === "none",
	fill: f.rect.attrs.fill, text: f.text.textContent,
}]));
api.flameInit(root);
const out = {};
out.matched = api.flameSearch(input.search);
out.matchedText = byId.matched.textContent;
out.searched = snap();
api.flameSearch("");
const target = api.frames().find(f => f.name === input.zoom);
api.flameZoom(target);
out.zoomed = snap();
out.unzoomHidden = byId.unzoom.cls.has("hide");
api.flameReset();
out.reset = snap();
api.flameSetIcicle(true);
out.icicle = snap();
process.stdout.write(JSON.stringify(out));
`

type jsFrame struct {
	X, Y, W float64
	Hidden  bool
	Fill    string
	Text    string
}

func TestSVGScriptBehaviour(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed (apt-get install nodejs): the graph's JavaScript is not exercised")
	}
	p := mustFolded(t, sample)
	o := Options{Width: 1000}.withDefaults()
	g := layout(p, o, nil)
	var svg bytes.Buffer
	if err := writeSVG(&svg, g, false); err != nil {
		t.Fatal(err)
	}
	_, frames := parseSVG(t, svg.Bytes())
	type inFrame struct {
		Title string  `json:"title"`
		Fill  string  `json:"fill"`
		Text  string  `json:"text"`
		X     float64 `json:"x"`
		Y     float64 `json:"y"`
		Width float64 `json:"width"`
	}
	var in struct {
		Frames []inFrame       `json:"frames"`
		Config json.RawMessage `json:"config"`
		Script string          `json:"script"`
		Search string          `json:"search"`
		Zoom   string          `json:"zoom"`
	}
	for _, f := range frames {
		in.Frames = append(in.Frames, inFrame{Title: f.Title, Fill: f.Rect.Fill, Text: f.Text, X: f.Rect.X, Y: f.Rect.Y, Width: f.Rect.Width})
	}
	in.Config, _ = g.scriptConfig(false)
	in.Script, in.Search, in.Zoom = flameJS, `^(runtime|encoding)`, "net/http.(*conn).serve"
	stdin, _ := json.Marshal(in)
	cmd := exec.Command(node, "-e", jsHarness)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var out struct {
		Matched      float64
		MatchedText  string
		UnzoomHidden bool
		Searched     map[string]jsFrame
		Zoomed       map[string]jsFrame
		Reset        map[string]jsFrame
		Icicle       map[string]jsFrame
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("harness output %s: %v", stdout, err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.02 }
	full := float64(o.Width) - 2*xpad

	// runtime.mallocgc (30) and encoding/json.Marshal (20) of 100 samples.
	if !near(out.Matched, 50) || out.MatchedText != "Matched: 50.0%" {
		t.Errorf("search matched %v%% (%q), want 50%%", out.Matched, out.MatchedText)
	}
	if out.Searched["runtime.mallocgc"].Fill != "rgb(230,0,230)" || out.Searched["main"].Fill == "rgb(230,0,230)" {
		t.Error("search highlighted the wrong frames")
	}

	// Zoom into serve (50 of 100): it and its callees fill the width, its
	// callers span it, everything else is hidden.
	z := out.Zoomed
	if s := z["net/http.(*conn).serve"]; s.Hidden || !near(s.X, xpad) || !near(s.W, full) {
		t.Errorf("zoomed frame at %+v, want x %v width %v", s, xpad, full)
	}
	if m := z["runtime.mallocgc"]; m.Hidden || !near(m.W, full*30/50) {
		t.Errorf("callee after zoom %+v, want width %v", m, full*30/50)
	}
	if a := z["main"]; a.Hidden || !near(a.W, full) {
		t.Errorf("caller after zoom %+v, want full width", a)
	}
	for _, name := range []string{"tcp_sendmsg_[k]", "java/lang/Thread.run_[j]", "tiny"} {
		if !z[name].Hidden {
			t.Errorf("%s visible after zooming elsewhere", name)
		}
	}
	if out.UnzoomHidden {
		t.Error("Reset Zoom hidden while zoomed")
	}
	if !strings.HasPrefix(z["net/http.(*conn).serve"].Text, "net/http") {
		t.Errorf("zoomed frame's label %q", z["net/http.(*conn).serve"].Text)
	}

	// Reset puts every frame back where the SVG drew it.
	for name, f := range frames {
		r := out.Reset[name]
		if r.Hidden || !near(r.X, f.Rect.X) || !near(r.W, f.Rect.Width) {
			t.Errorf("%s after reset %+v, want x %v width %v", name, r, f.Rect.X, f.Rect.Width)
		}
	}

	// Icicle: the root row moves to the top.
	if y := out.Icicle["all"].Y; !near(y, g.ypad1) || !(out.Icicle["main"].Y > y) {
		t.Errorf("icicle root at y %v (main %v), want %v and main below", y, out.Icicle["main"].Y, g.ypad1)
	}
}
