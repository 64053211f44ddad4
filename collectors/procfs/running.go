package procfs

import (
	"os"
	"strconv"
	"strings"
)

// MaxProcessScan bounds a scan of every process: the daemons looked for are
// system services with low pids, and hosts with many containers run tens
// of thousands of processes.
const MaxProcessScan = 8192

// Running finds the processes whose command name (/proc/PID/comm) is one of
// comms, in one scan of /proc (at most MaxProcessScan processes, in
// directory order, stopping once each is found): comm → the first pid
// found; a comm not running is absent. Looking for two daemons costs one
// scan, not two.
func (fs FS) Running(comms ...string) (map[string]int, error) {
	entries, err := os.ReadDir(fs.Path("/proc"))
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, c := range comms {
		want[c] = true
	}
	out := map[string]int{}
	scanned := 0
	for _, e := range entries {
		if len(out) == len(want) {
			break
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if scanned++; scanned > MaxProcessScan {
			break
		}
		c, err := fs.ReadString("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue // exited meanwhile
		}
		if c = strings.TrimSpace(c); want[c] {
			if _, seen := out[c]; !seen {
				out[c] = pid
			}
		}
	}
	return out, nil
}
