package spec

import (
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// Kind is the type of a recipe parameter or of a probe's or collector's
// option: what a value must look like, in YAML and in --set. Parsed values
// are Go values: int64 (int, port, pid, size), float64, bool,
// time.Duration, cpuset.Set, []string (files, list), []int64 (ports) and
// string (the rest).
type Kind string

const (
	KindString    Kind = "string"
	KindInt       Kind = "int"
	KindFloat     Kind = "float"
	KindBool      Kind = "bool"
	KindDuration  Kind = "duration"
	KindCPUs      Kind = "cpus"
	KindPort      Kind = "port"
	KindPID       Kind = "pid"
	KindInterface Kind = "interface"
	KindEnum      Kind = "enum"
	KindSize      Kind = "size"
	KindURL       Kind = "url"
	// KindList is a list of texts (HTTP headers, label filters): a YAML
	// sequence in a recipe; with --set one item per line, or --set given
	// once per item.
	KindList Kind = "list"
	// KindPorts is a list of ports: a YAML sequence, or 8080,8443.
	KindPorts Kind = "ports"
	// KindDir, KindFile and KindFiles name places on disk. A recipe can
	// reach them only through parameters without defaults, so every file
	// a recipe reads or writes is one the user named when running it.
	KindDir   Kind = "dir"
	KindFile  Kind = "file"
	KindFiles Kind = "files"
)

// Kinds are the parameter types a recipe may declare, in the order the
// documentation lists them.
var Kinds = []Kind{KindString, KindInt, KindFloat, KindBool, KindDuration, KindCPUs, KindPort, KindPID,
	KindInterface, KindEnum, KindSize, KindURL, KindList, KindPorts, KindDir, KindFile, KindFiles}

// IsList says whether a value of the kind is a list whose items --set may
// give one at a time (NAME=a --set NAME=b): joined with JoinItems.
func (k Kind) IsList() bool { return k == KindList || k == KindPorts || k == KindFiles }

// JoinItems joins list items given one at a time into the one text a
// list parameter takes.
func (k Kind) JoinItems(items []string) string {
	if k == KindList {
		return strings.Join(items, "\n")
	}
	return strings.Join(items, ",")
}

// names a file: the kinds whose values may only come from the user.
func (k Kind) NamesFile() bool { return k == KindDir || k == KindFile || k == KindFiles }

// Domain is a kind with its bounds: what one value must be.
type Domain struct {
	Kind Kind
	// Min and Max bound int, float, size and duration values (durations
	// in nanoseconds); nil is unbounded.
	Min, Max *float64
	// Values are an enum's allowed values.
	Values []string
}

// Bound is a domain bound: &v.
func Bound(v float64) *float64 { return &v }

// Want says what a value of the domain looks like ("an integer ≥ 1"), as
// errors and the catalog print it.
func (d Domain) Want() string {
	rng := func(noun, example string, f func(float64) string) string {
		switch {
		case d.Min != nil && d.Max != nil:
			return fmt.Sprintf("%s %s–%s", noun, f(*d.Min), f(*d.Max))
		case d.Min != nil:
			return fmt.Sprintf("%s ≥ %s", noun, f(*d.Min))
		case d.Max != nil:
			return fmt.Sprintf("%s ≤ %s", noun, f(*d.Max))
		}
		return noun + example
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	switch d.Kind {
	case KindInt:
		return rng("an integer", "", num)
	case KindFloat:
		return rng("a number", "", num)
	case KindSize:
		return rng("a size", " like 512k", func(v float64) string { return formatSize(int64(v)) })
	case KindDuration:
		return rng("a duration", " like 10s", func(v float64) string { return shortDuration(time.Duration(v)) })
	case KindBool:
		return "true or false"
	case KindCPUs:
		return `a CPU list like 0-3,8 ("" for every CPU)`
	case KindPort:
		if d.Min != nil && *d.Min >= 1 {
			return "a port 1–65535"
		}
		return "a port 0–65535 (0: none)"
	case KindPID:
		if d.Min != nil && *d.Min >= 1 {
			return "a process id"
		}
		return "a process id (0: none)"
	case KindInterface:
		return "a network interface name"
	case KindEnum:
		q := make([]string, len(d.Values))
		for i, v := range d.Values {
			q[i] = strconv.Quote(v)
		}
		return "one of " + strings.Join(q, ", ")
	case KindURL:
		return "an http:// or https:// URL"
	case KindDir:
		return "a directory"
	case KindFile:
		return "a file"
	case KindFiles:
		return "a list of files"
	case KindList:
		return "a list of texts (with --set, one per line or --set per item)"
	case KindPorts:
		return "a list of ports like 8080,8443"
	}
	return "a string"
}

// interfaceName is what the kernel accepts as an interface name.
var interfaceName = regexp.MustCompile(`^[^/\s:]{1,15}$`)

// MaxText bounds any one string value: recipes are small.
const MaxText = 4096

// Parse reads one value of the domain from its text (a YAML scalar or a
// --set value). The error is "want …, got …" without the place.
func (d Domain) Parse(text string) (any, error) {
	if len(text) > MaxText || strings.ContainsRune(text, 0) {
		return nil, WantGot(d.Want(), fmt.Sprintf("a value of %d bytes", len(text)))
	}
	switch d.Kind {
	case KindInt, KindFloat, KindSize, KindDuration, KindBool, KindPort, KindPID:
		return d.parseBounded(text)
	case KindFiles, KindList, KindPorts:
		return d.parseList(text)
	}
	return d.parseText(text)
}

// wantGot is the error for text that is not a value of the domain.
func (d Domain) wantGot(text string) error { return WantGot(d.Want(), strconv.Quote(text)) }

// parseBounded reads the kinds whose value then meets Min and Max.
func (d Domain) parseBounded(text string) (any, error) {
	var v any
	var num float64
	switch d.Kind {
	case KindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, d.wantGot(text)
		}
		v, num = n, float64(n)
	case KindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, d.wantGot(text)
		}
		v, num = f, f
	case KindSize:
		n, err := parseSize(text)
		if err != nil {
			return nil, d.wantGot(text)
		}
		v, num = n, float64(n)
	case KindDuration:
		dur, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return nil, d.wantGot(text)
		}
		v, num = dur, float64(dur)
	case KindBool:
		switch text {
		case "true":
			v = true
		case "false":
			v = false
		default:
			return nil, d.wantGot(text)
		}
	case KindPort:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil || n < 0 || n > 65535 {
			return nil, d.wantGot(text)
		}
		v, num = n, float64(n)
	case KindPID:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, d.wantGot(text)
		}
		v, num = n, float64(n)
	}
	if (d.Min != nil && num < *d.Min) || (d.Max != nil && num > *d.Max) {
		return nil, d.wantGot(text)
	}
	return v, nil
}

// parseText reads the kinds that are one value with no bounds: a CPU
// list, a name, a URL, a path or a string.
func (d Domain) parseText(text string) (any, error) {
	switch d.Kind {
	case KindCPUs:
		if strings.TrimSpace(text) == "" {
			return cpuset.Set{}, nil
		}
		s, err := cpuset.ParseList(strings.TrimSpace(text))
		if err != nil {
			return nil, d.wantGot(text)
		}
		return s, nil
	case KindInterface:
		if text != "" && (!interfaceName.MatchString(text) || text == "." || text == "..") {
			return nil, d.wantGot(text)
		}
		return text, nil
	case KindEnum:
		if !slices.Contains(d.Values, text) {
			return nil, d.wantGot(text)
		}
		return text, nil
	case KindURL:
		if text == "" {
			return text, nil
		}
		u, err := url.Parse(text)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, d.wantGot(text)
		}
		return text, nil
	case KindDir, KindFile:
		if HasControl(text) {
			return nil, d.wantGot(text)
		}
		if text == "" {
			return text, nil
		}
		return filepath.Clean(text), nil
	default: // KindString
		// Tabs and line breaks are text (a request body); other control
		// characters are not, and would reach a terminal.
		if HasControl(strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(text)) {
			return nil, d.wantGot(text)
		}
		return text, nil
	}
}

// parseList reads the list kinds; empty items are left out.
func (d Domain) parseList(text string) (any, error) {
	switch d.Kind {
	case KindFiles:
		var files []string
		for _, f := range strings.Split(text, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if HasControl(f) {
					return nil, d.wantGot(text)
				}
				files = append(files, filepath.Clean(f))
			}
		}
		return files, nil
	case KindList:
		var items []string
		for _, item := range strings.Split(text, "\n") {
			if item = strings.TrimSpace(item); item != "" {
				if HasControl(item) {
					return nil, d.wantGot(text)
				}
				items = append(items, item)
			}
		}
		return items, nil
	default: // KindPorts
		var ports []int64
		for _, item := range strings.Split(text, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			n, err := strconv.ParseInt(item, 10, 64)
			if err != nil || n < 1 || n > 65535 {
				return nil, WantGot(d.Want(), strconv.Quote(item))
			}
			ports = append(ports, n)
		}
		return ports, nil
	}
}

// Check tests an already parsed value (a parameter's, reaching an option)
// against the domain's bounds and values.
func (d Domain) Check(v any) error {
	var num float64
	switch x := v.(type) {
	case int64:
		num = float64(x)
	case float64:
		num = x
	case time.Duration:
		num = float64(x)
	case string:
		if d.Kind == KindEnum && !slices.Contains(d.Values, x) {
			return WantGot(d.Want(), strconv.Quote(x))
		}
		return nil
	default:
		return nil
	}
	if (d.Min != nil && num < *d.Min) || (d.Max != nil && num > *d.Max) {
		return WantGot(d.Want(), FormatValue(v))
	}
	return nil
}

// Accepts says whether a parameter of kind from may feed an option of this
// domain: the same kind, or a narrower number (ports and pids are
// integers, integers are numbers), or a string or enum for an enum (its
// value is checked when bound).
func (d Domain) Accepts(from Kind) bool {
	switch {
	case from == d.Kind:
		return true
	case d.Kind == KindInt:
		return from == KindPort || from == KindPID || from == KindSize
	case d.Kind == KindFloat:
		return from == KindInt
	case d.Kind == KindEnum:
		return from == KindString
	case d.Kind == KindFiles:
		return from == KindFile
	case d.Kind == KindList:
		return from == KindString
	case d.Kind == KindPorts:
		return from == KindPort
	}
	return false
}

// Convert turns a parameter's value into the option's Go type where the
// two kinds differ (an int parameter feeding a float option, one file
// feeding a list).
func (d Domain) Convert(v any) any {
	switch x := v.(type) {
	case int64:
		if d.Kind == KindFloat {
			return float64(x)
		}
	case string:
		if d.Kind == KindFiles || d.Kind == KindList {
			if x == "" {
				return []string(nil)
			}
			return []string{x}
		}
	}
	if x, ok := v.(int64); ok && d.Kind == KindPorts {
		if x == 0 {
			return []int64(nil)
		}
		return []int64{x}
	}
	return v
}

// shortDuration prints 24h rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, z := range []string{"m0s", "h0m"} {
		if strings.HasSuffix(s, z) {
			s = strings.TrimSuffix(s, z[1:])
		}
	}
	return s
}

// Article is "a" or "an" before a word.
func Article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}

// HasControl says whether s holds a control character.
func HasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// parseSize reads "524288", "512k", "1m" (binary units).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToLower(s), "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(strings.ToLower(s), "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size like 512k", s)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dg", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dm", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dk", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// FormatValue prints a parsed value the way a user would write it.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return x.String()
	case cpuset.Set:
		return x.List()
	case []string:
		return strings.Join(x, ",")
	case []int64:
		s := make([]string, len(x))
		for i, n := range x {
			s[i] = strconv.FormatInt(n, 10)
		}
		return strings.Join(s, ",")
	}
	return fmt.Sprint(v)
}

// Format prints a value of the domain as --set takes it.
func (d Domain) Format(v any) string {
	if n, ok := v.(int64); ok && d.Kind == KindSize {
		return formatSize(n)
	}
	if items, ok := v.([]string); ok && d.Kind == KindList {
		return d.Kind.JoinItems(items)
	}
	return FormatValue(v)
}

// IsSet says whether a value is given: non-zero, non-empty (what
// `enabled: ${p}` tests for a parameter that is not a bool).
func IsSet(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case int64:
		return x != 0
	case float64:
		return x != 0
	case bool:
		return x
	case time.Duration:
		return x != 0
	case cpuset.Set:
		return !x.IsEmpty()
	case []string:
		return len(x) > 0
	case []int64:
		return len(x) > 0
	}
	return true
}

// wantGot is the body of every value error.
type wantGotError struct{ want, got string }

func (e *wantGotError) Error() string { return "want " + e.want + ", got " + e.got }

// WantGot is the error "want WANT, got GOT".
func WantGot(want, got string) error { return &wantGotError{want: want, got: got} }
