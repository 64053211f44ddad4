package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
)

func procStartTime(pid int) (time.Time, bool) {
	t, err := procfs.Default.ProcessStart(pid)
	return t, err == nil
}

// checkPID is the one check of a --pid flag, shared by every command that
// takes one: the process must exist, be alive (a zombie has exited and
// only waits for its parent to reap it: nothing to measure), and be a
// process, not one of its threads (/proc/TID exists for threads too, but
// probes and attach work on the thread group). Each failure is bad input
// (exit 2) with the way out.
func checkPID(procFS procfs.FS, flag string, pid int) error {
	if pid <= 0 {
		return usageError("%s must be a positive process id, got %d", flag, pid)
	}
	st, err := procFS.Status(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return usageError("%s %d: no such process (not running)", flag, pid)
	}
	if err != nil {
		return fmt.Errorf("read status of process %d: %w", pid, err)
	}
	if st.State == "Z" || st.State == "X" {
		return usageError("%s %d: the process has exited (a zombie waiting for its parent to reap it)", flag, pid)
	}
	if len(st.NStgid) > 0 && st.NStgid[0] != pid {
		return usageError("%s %d is a thread of process %d: pass %s %d", flag, pid, st.NStgid[0], flag, st.NStgid[0])
	}
	return nil
}
