package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// A command accepts the formats its data renders: a recipe run those of
// every section it may print (stacks drawn), flame diff those flame draws
// a differential graph in.
func TestFormatsFollowTheData(t *testing.T) {
	for command, want := range map[string][]Format{
		"softirq":     {Text, JSON, HTML},
		"version":     {Text, JSON},
		"recipe show": {YAML, JSON},
		"flame diff":  {SVG, HTML, Folded, Text, JSON},
		"flame":       {SVG, HTML, Pprof, Speedscope, Folded, Text, JSON},
		"profile":     {Text, JSON, SVG, HTML, Pprof, Speedscope, Folded},
		"recipe run":  {Text, JSON, SVG, HTML, Pprof, Speedscope, Folded},
		"jvm":         {Text, JSON, HTML},
	} {
		if got := Formats(command); !slices.Equal(got, want) {
			t.Errorf("Formats(%q) = %v, want %v", command, got, want)
		}
	}
	Register("test stacks", evidence.OffCPU{})
	if got := Formats("test stacks"); !slices.Contains(got, Pprof) {
		t.Errorf("off-CPU data draws its stacks: %v", got)
	}
}

// An unknown format is one sentence naming the command's formats; the
// help of -o lists the same.
func TestParseFormat(t *testing.T) {
	if f, err := ParseFormat("gclog", "html"); err != nil || f != HTML {
		t.Errorf("html: %v %v", f, err)
	}
	_, err := ParseFormat("gclog", "svg")
	if err == nil || err.Error() != `unknown output format "svg": perfscope gclog writes text, json or html` {
		t.Errorf("svg: %v", err)
	}
	if got := FormatUsage("recipe list"); got != "output format: text or json" {
		t.Errorf("usage %q", got)
	}
	if got := FormatUsage("udp"); !strings.Contains(got, "html (one self-contained page)") {
		t.Errorf("usage %q", got)
	}
}
