package recipes

import "github.com/perfscope/perfscope/spec"

// The value domains of parameters and options are spec's: a part's spec
// declares its options' domains, and recipes parse values into them.
type (
	Kind   = spec.Kind
	Domain = spec.Domain
)

// The kinds of values, as recipes write them.
const (
	KindString    = spec.KindString
	KindInt       = spec.KindInt
	KindFloat     = spec.KindFloat
	KindBool      = spec.KindBool
	KindDuration  = spec.KindDuration
	KindCPUs      = spec.KindCPUs
	KindPort      = spec.KindPort
	KindPID       = spec.KindPID
	KindInterface = spec.KindInterface
	KindEnum      = spec.KindEnum
	KindSize      = spec.KindSize
	KindURL       = spec.KindURL
	KindList      = spec.KindList
	KindPorts     = spec.KindPorts
	KindDir       = spec.KindDir
	KindFile      = spec.KindFile
	KindFiles     = spec.KindFiles
)

// Kinds are every kind, in the order the catalog lists them.
var Kinds = spec.Kinds

func bound(v float64) *float64 { return spec.Bound(v) }

func formatValue(v any) string { return spec.FormatValue(v) }

func isSet(v any) bool { return spec.IsSet(v) }

func wantGot(want, got string) error { return spec.WantGot(want, got) }

func article(w string) string { return spec.Article(w) }

func hasControl(s string) bool { return spec.HasControl(s) }
