package flame

import (
	"errors"
	"testing"
)

// Counts are decimal numbers of samples, with FlameGraph's optional
// fraction; what strconv.ParseFloat would also take is refused.
func TestParseCount(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "42": 42, "12.5": 13, "12.4": 12, "3.": 3, "007": 7,
		"9223372036854775807":   1<<63 - 1,
		"9223372036854775806.5": 1<<63 - 1,
	} {
		if got, err := parseCount([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"1e3", "1E3", "0x10", "0x1p4", "1_000", "12.5.1", "1.5e2", "12a"} {
		if _, err := parseCount([]byte(in)); err == nil || errors.Is(err, ErrCountTooLarge) {
			t.Errorf("%q: %v, want not a count", in, err)
		}
	}
	for _, in := range []string{"", "+5", "-5", "NaN", "Inf", ".5", "x"} {
		if _, err := parseCount([]byte(in)); !errors.Is(err, errFoldedValue) {
			t.Errorf("%q: %v, want not a folded stack", in, err)
		}
	}
	for _, in := range []string{"9223372036854775808", "99999999999999999999", "9223372036854775807.5"} {
		if _, err := parseCount([]byte(in)); !errors.Is(err, ErrCountTooLarge) {
			t.Errorf("%q: %v, want too large", in, err)
		}
	}
}
