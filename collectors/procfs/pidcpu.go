package procfs

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is the CPU time process pid has used, user and system
// (utime + stime, fields 14 and 15 of /proc/PID/stat), in USER_HZ ticks
// of 10 ms. An error wrapping fs.ErrNotExist means the process is gone.
func (fs FS) ProcessCPU(pid int) (time.Duration, error) {
	stat, err := fs.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcessCPU(stat)
}

// parseProcessCPU reads utime and stime from a stat line. comm (field 2)
// may hold spaces and parentheses: fields are counted after the last ')'.
func parseProcessCPU(stat string) (time.Duration, error) {
	closing := strings.LastIndexByte(stat, ')')
	if closing < 0 {
		return 0, fmt.Errorf("stat %.40q: no comm", stat)
	}
	f := strings.Fields(stat[closing+1:])
	const utime = 14 - 3 // field 14, counted from field 3
	if len(f) <= utime+1 {
		return 0, fmt.Errorf("stat: %d fields, want at least 15", len(f)+2)
	}
	var ticks int64
	for _, v := range f[utime : utime+2] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("stat: CPU time %q", v)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
