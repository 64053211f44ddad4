package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestBarWidthAndFill(t *testing.T) {
	for _, c := range []struct {
		frac float64
		full int
	}{{0, 0}, {0.5, 5}, {1, 10}, {2, 10}, {-1, 0}} {
		b := Bar(c.frac, 10)
		if n := len([]rune(b)); n != 10 {
			t.Errorf("Bar(%v) has %d cells", c.frac, n)
		}
		if got := strings.Count(b, "█"); got != c.full {
			t.Errorf("Bar(%v) has %d full cells, want %d", c.frac, got, c.full)
		}
	}
}

func TestTableAlignsNumbersRight(t *testing.T) {
	var buf bytes.Buffer
	tb := Table{Header: []string{"CPU", "COUNT", "NOTE"}}
	tb.Add("cpu0", "5", "x")
	tb.Add("cpu10", "12345", "long note")
	tb.Write(&buf)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%q", buf.String())
	}
	if !strings.HasPrefix(lines[1], "cpu0       5") {
		t.Errorf("row not aligned: %q", lines[1])
	}
}

func TestUnits(t *testing.T) {
	cases := map[string]string{
		Count(1234567): "1.23M", Bytes(34 * 1024): "34.0 KiB", Nanos(1500): "1.5µs", Percent(0.123): "12.3%",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
}
