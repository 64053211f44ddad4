package procfs

import (
	"testing"
	"time"
)

func TestParseProcessCPU(t *testing.T) {
	// A comm with a space and a parenthesis, utime 250 and stime 130 ticks.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 130 0 0 20 0 3 0 100 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	d, err := parseProcessCPU(line)
	if err != nil || d != 3800*time.Millisecond {
		t.Errorf("parseProcessCPU = %v, %v; want 3.8s", d, err)
	}
	for _, bad := range []string{"", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 10 -5 3"} {
		if _, err := parseProcessCPU(bad); err == nil {
			t.Errorf("parseProcessCPU(%q) accepted it", bad)
		}
	}
}
