package procfs

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// NetDevPackets is every interface's received plus sent packets in this
// network namespace (/proc/net/dev): exact, always counting, and cheap to
// read, the reference the overhead budget scales sampled counts by.
func (fs FS) NetDevPackets() (uint64, error) {
	f, err := fs.Open("/proc/net/dev")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseNetDevPackets(f)
}

// parseNetDevPackets sums the rx packets (2nd) and tx packets (10th)
// columns after each "iface:".
func parseNetDevPackets(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	var total uint64
	rows := 0
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue // the two header lines
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return 0, fmt.Errorf("/proc/net/dev: %s: want 16 counters, got %d", strings.TrimSpace(name), len(f))
		}
		for _, i := range []int{1, 9} {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/net/dev: %s: %v", strings.TrimSpace(name), err)
			}
			total += n
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if rows == 0 {
		return 0, fmt.Errorf("/proc/net/dev: no interfaces")
	}
	return total, nil
}
