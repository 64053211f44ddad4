package cli

import (
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
)

func procStartTime(pid int) (time.Time, bool) {
	t, err := procfs.Default.ProcessStart(pid)
	return t, err == nil
}
