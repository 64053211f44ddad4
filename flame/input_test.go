package flame

import (
	"strings"
	"testing"
)

// GraphFlags.Check refuses each bad flag in a sentence naming it, and
// reads good ones into the options ReadInputs and the graph use.
func TestGraphFlagsCheck(t *testing.T) {
	good := GraphFlags{Format: "auto", Unit: "samples", Width: 1200, MinWidth: "0.1", Top: 20, MaxMemory: 256}
	in, minWidth, err := good.Check()
	if err != nil || in.Format != FormatAuto || in.Unit != Samples || in.MaxMemoryMiB != 256 || minWidth != 0.1 || in.Filter.Include != nil {
		t.Fatalf("Check() = %+v, %v, %v", in, minWidth, err)
	}
	pct := good
	pct.Width, pct.MinWidth, pct.Include = 800, "1%", "^java"
	if in, minWidth, err := pct.Check(); err != nil || minWidth != 0.01*(800-20) || in.Filter.Include == nil {
		t.Errorf("--minwidth 1%% --include ^java: %+v, %v, %v", in, minWidth, err)
	}
	for _, c := range []struct {
		change func(*GraphFlags)
		want   string
	}{
		{func(f *GraphFlags) { f.Format = "xml" }, `unknown input format "xml"`},
		{func(f *GraphFlags) { f.Unit = "pages" }, `unknown unit "pages"`},
		{func(f *GraphFlags) { f.Width = 5 }, "--width must be between 100 and 100000 pixels, got 5"},
		{func(f *GraphFlags) { f.Width = 100001 }, "--width must be between 100 and 100000 pixels, got 100001"},
		{func(f *GraphFlags) { f.MinWidth = "-1" }, `--minwidth "-1"`},
		{func(f *GraphFlags) { f.Top = -1 }, "--top must not be negative, got -1"},
		{func(f *GraphFlags) { f.MaxMemory = 8 }, "--max-memory must be between 16 and 1048576 MiB, got 8"},
		{func(f *GraphFlags) { f.Exclude = "(" }, `--exclude "(" is not a regular expression`},
	} {
		f := good
		c.change(&f)
		if _, _, err := f.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", f, err, c.want)
		}
	}
}

func TestCheckInputs(t *testing.T) {
	for _, c := range []struct {
		paths []string
		ok    bool
	}{{nil, true}, {[]string{"-"}, true}, {[]string{"a", "-", "b"}, true}, {[]string{"-", "a", "-"}, false}, {[]string{"-", "-"}, false}} {
		if err := CheckInputs(c.paths...); (err == nil) != c.ok {
			t.Errorf("CheckInputs(%q) = %v", c.paths, err)
		}
	}
}
