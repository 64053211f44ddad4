package report

import (
	"fmt"
	"strings"
	"sync"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// YAML is a recipe's own text (`recipe show`).
const YAML Format = "yaml"

// Formatted is data that says which formats it renders. The formats a
// command accepts are those of the data it prints (see Register), so
// its -o, its help and its error for an unknown format follow the data,
// and a format a data type learns reaches its commands with no CLI
// change.
type Formatted interface {
	Formats() []Format
}

// The format sets data types share.
var (
	// textFormats: data printed as text or JSON only.
	textFormats = []Format{Text, JSON}
	// stackFormats: data with stacks, which also draws them in every
	// flame.Output (its HTML is the report page, flame graph included).
	stackFormats = append([]Format{Text, JSON}, GraphFormats...)
)

// formatsOf says which formats data renders: its own Formats, or for the
// evidence types the commands print as they are, by what they hold.
func formatsOf(data any) []Format {
	switch d := data.(type) {
	case Formatted:
		return d.Formats()
	case evidence.Profile, evidence.OffCPU:
		return stackFormats
	case evidence.SoftirqEvidence, evidence.LockSection:
		return PageFormats
	}
	return textFormats
}

var (
	commandsMu sync.Mutex
	commands   = map[string][]any{
		"udp":             {NetData{}},
		"tcp":             {NetData{}},
		"softirq":         {evidence.SoftirqEvidence{}},
		"profile":         {evidence.Profile{}},
		"offcpu":          {evidence.OffCPU{}},
		"jvm":             {JVMData{}, JVMStopData{}},
		"go":              {GoData{}},
		"load":            {LoadData{}},
		"gclog":           {GCLogData{}},
		"lab jvm":         {LabJVMData{}},
		"lab udp-server":  {LabUDPServerData{}},
		"lab udp-flood":   {LabUDPFloodData{}},
		"lab tcp":         {LabTCPData{}},
		"flame":           {FlameSummary{}},
		"flame diff":      {FlameDiffSummary{}},
		"doctor":          {DoctorData{}},
		"version":         {VersionData{}},
		"recipe list":     {RecipeList{}},
		"recipe show":     {RecipeInfo{}},
		"recipe validate": {RecipeValidation{}},
		"recipe catalog":  {RecipeCatalog{}},
		// A recipe run prints the data of the sections it measures.
		"recipe run": {RecipeData{}, NetData{}, evidence.SoftirqEvidence{}, evidence.LockSection{}, evidence.Profile{}, evidence.OffCPU{}},
	}
)

// Register says that command prints data (zero values of its types):
// for the commands whose data lives above this package (the lab's
// results, a comparison of two runs). A command printing several types
// accepts every format one of them renders.
func Register(command string, data ...any) {
	commandsMu.Lock()
	defer commandsMu.Unlock()
	commands[command] = append(commands[command], data...)
}

// Formats are the output formats command accepts: those its data renders,
// in the order its data lists them.
func Formats(command string) []Format {
	commandsMu.Lock()
	data, ok := commands[command]
	commandsMu.Unlock()
	if !ok {
		panic(fmt.Sprintf("report: no data registered for command %q", command))
	}
	var out []Format
	seen := map[Format]bool{}
	for _, d := range data {
		for _, f := range formatsOf(d) {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// ParseFormat checks -o against the formats command accepts; an unknown
// one is one sentence naming them.
func ParseFormat(command, v string) (Format, error) {
	formats := Formats(command)
	for _, f := range formats {
		if string(f) == v {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown output format %q: perfscope %s writes %s", v, command, formatList(formats, false))
}

// FormatUsage is the help of command's -o flag.
func FormatUsage(command string) string {
	return "output format: " + formatList(Formats(command), true)
}

// formatList is "a, b or c"; notes says what html is.
func formatList(formats []Format, notes bool) string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
		if f == HTML && notes {
			names[i] += " (one self-contained page)"
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Formats implements Formatted: a network run has its page.
func (NetData) Formats() []Format { return PageFormats }

// Formats implements Formatted.
func (JVMData) Formats() []Format { return PageFormats }

// Formats implements Formatted: --stop's report is text or JSON.
func (JVMStopData) Formats() []Format { return textFormats }

// Formats implements Formatted.
func (GoData) Formats() []Format { return PageFormats }

// Formats implements Formatted: the levels as text, JSON or a page.
func (LoadData) Formats() []Format { return PageFormats }

// Formats implements Formatted.
func (GCLogData) Formats() []Format { return PageFormats }

// Formats implements Formatted.
func (LabJVMData) Formats() []Format { return PageFormats }

// Formats implements Formatted: a recipe with stacks draws them.
func (RecipeData) Formats() []Format { return stackFormats }

// Formats implements Formatted: a recipe's YAML, or its parameters as
// JSON.
func (RecipeInfo) Formats() []Format { return []Format{YAML, JSON} }

// Formats implements Formatted: the stacks in every flame.Output, or
// their summary as text or JSON.
func (FlameSummary) Formats() []Format {
	return append(GraphFormats[:len(GraphFormats):len(GraphFormats)], Text, JSON)
}

// Formats implements Formatted: a differential graph in the formats
// flame draws one in, or its summary as text or JSON.
func (FlameDiffSummary) Formats() []Format {
	out := make([]Format, 0, len(flame.DiffOutputs)+2)
	for _, o := range flame.DiffOutputs {
		out = append(out, Format(o))
	}
	return append(out, Text, JSON)
}
