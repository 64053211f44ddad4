package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/perfscope/perfscope/diagnose"
)

// Table prints aligned columns. Cells that look numeric are right-aligned.
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Write prints the table with two spaces between columns.
func (t *Table) Write(w io.Writer) {
	widths := make([]int, len(t.Header))
	all := append([][]string{t.Header}, t.Rows...)
	for _, r := range all {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			if n := utf8.RuneCountInString(c); n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range all {
		var b strings.Builder
		for i, c := range r {
			pad := widths[i] - utf8.RuneCountInString(c)
			if i > 0 {
				b.WriteString("  ")
			}
			if numeric(c) {
				b.WriteString(strings.Repeat(" ", pad) + c)
			} else if i == len(r)-1 {
				b.WriteString(c)
			} else {
				b.WriteString(c + strings.Repeat(" ", pad))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func numeric(s string) bool {
	if s == "" || s == "-" {
		return s == "-"
	}
	c := s[0]
	return (c >= '0' && c <= '9') || ((c == '-' || c == '+' || c == '.') && len(s) > 1 && s[1] >= '0' && s[1] <= '9')
}

// Bar draws frac (0..1) as a bar of width cells with eighth-block precision.
func Bar(frac float64, width int) string {
	if math.IsNaN(frac) || frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	eighths := int(math.Round(frac * float64(width*8)))
	full, rest := eighths/8, eighths%8
	parts := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	s := strings.Repeat("█", full) + parts[rest]
	return s + strings.Repeat(" ", width-utf8.RuneCountInString(s))
}

// Count prints n with a k/M/G suffix.
func Count(n float64) string {
	switch a := math.Abs(n); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// Bytes prints b with binary units.
func Bytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(b) >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

// Percent prints a fraction as a percentage.
func Percent(frac float64) string {
	if math.IsNaN(frac) || math.IsInf(frac, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", frac*100)
}

// Nanos prints a duration given in nanoseconds with a fitting unit.
func Nanos(ns float64) string {
	switch a := math.Abs(ns); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fs", ns/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fms", ns/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1fµs", ns/1e3)
	}
	return fmt.Sprintf("%.0fns", ns)
}

// Heading prints a section title underlined.
func Heading(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n%s\n", title, strings.Repeat("─", utf8.RuneCountInString(title)))
}

// writeFindingsIfAny prints the findings of a command whose text had
// none before it followed a recipe with rules: nothing when there are
// none, so such a run reads as it always has.
func writeFindingsIfAny(w io.Writer, fs []diagnose.Finding) {
	if len(fs) > 0 {
		Heading(w, "Findings")
		WriteFindings(w, fs)
	}
}

// WriteFindings prints ranked findings with evidence and commands.
func WriteFindings(w io.Writer, fs []diagnose.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "No findings.")
		return
	}
	for i, f := range fs {
		fmt.Fprintf(w, "%d. [%s] %s  (%s)\n", i+1, strings.ToUpper(f.Severity.String()), f.Title, f.ID)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "   • %s\n", e)
		}
		r := f.Recommendation
		if r.Why != "" {
			fmt.Fprintf(w, "   why: %s\n", r.Why)
		}
		for _, c := range r.Apply {
			fmt.Fprintf(w, "   apply:  %s\n", c)
		}
		for _, c := range r.Revert {
			fmt.Fprintf(w, "   revert: %s\n", c)
		}
		for _, cs := range r.Code {
			fmt.Fprintf(w, "   %s:\n", cs.Lang)
			for _, l := range strings.Split(strings.TrimRight(cs.Code, "\n"), "\n") {
				fmt.Fprintf(w, "     %s\n", l)
			}
		}
		for _, c := range r.Caveats {
			fmt.Fprintf(w, "   caveat: %s\n", c)
		}
		if r.Expected != "" {
			fmt.Fprintf(w, "   expect: %s\n", r.Expected)
		}
		if r.Reference != "" {
			fmt.Fprintf(w, "   ref:    %s\n", r.Reference)
		}
	}
}
