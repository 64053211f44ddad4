package procfs

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/stat times. It is 100 on every Linux
// architecture perfscope supports (the kernel exports USER_HZ, not HZ).
const userHZ = 100

// CPUTimes are the cumulative times of one CPU from /proc/stat.
type CPUTimes struct {
	CPU                                                   int // -1 for the "cpu" total line
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal time.Duration
}

// Total is the sum of every state.
func (t CPUTimes) Total() time.Duration {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// Stat is the part of /proc/stat perfscope uses.
type Stat struct {
	Total CPUTimes
	// PerCPU is indexed by position; use CPU for the number.
	PerCPU []CPUTimes
	// BootTime is btime, seconds since the epoch.
	BootTime int64
}

// Stat reads /proc/stat.
func (fs FS) Stat() (Stat, error) {
	f, err := fs.Open("/proc/stat")
	if err != nil {
		return Stat{}, err
	}
	defer f.Close()
	return parseStat(f)
}

func parseStat(r io.Reader) (Stat, error) {
	var s Stat
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch {
		case fields[0] == "btime":
			v, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("stat btime: %w", err)
			}
			s.BootTime = v
		case strings.HasPrefix(fields[0], "cpu"):
			t, err := parseCPULine(fields)
			if err != nil {
				return s, err
			}
			if t.CPU < 0 {
				s.Total = t
			} else {
				s.PerCPU = append(s.PerCPU, t)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if len(s.PerCPU) == 0 {
		return s, fmt.Errorf("stat: no per-CPU lines")
	}
	return s, nil
}

func parseCPULine(fields []string) (CPUTimes, error) {
	t := CPUTimes{CPU: -1}
	if fields[0] != "cpu" {
		n, err := strconv.Atoi(strings.TrimPrefix(fields[0], "cpu"))
		if err != nil {
			return t, fmt.Errorf("stat: bad cpu label %q", fields[0])
		}
		t.CPU = n
	}
	if len(fields) < 8 {
		return t, fmt.Errorf("stat %s: %d fields, want at least 7 times", fields[0], len(fields)-1)
	}
	dst := []*time.Duration{&t.User, &t.Nice, &t.System, &t.Idle, &t.IOWait, &t.IRQ, &t.SoftIRQ, &t.Steal}
	for i, p := range dst {
		if i+1 >= len(fields) {
			break // steal is absent on very old kernels
		}
		v, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return t, fmt.Errorf("stat %s: %w", fields[0], err)
		}
		*p = time.Duration(v) * time.Second / userHZ
	}
	return t, nil
}

// CPU returns the times of CPU n.
func (s Stat) CPU(n int) (CPUTimes, bool) {
	for _, t := range s.PerCPU {
		if t.CPU == n {
			return t, true
		}
	}
	return CPUTimes{}, false
}

// Sub returns s − prev for every CPU present in both.
func (s Stat) Sub(prev Stat) Stat {
	d := Stat{BootTime: s.BootTime, Total: subTimes(s.Total, prev.Total)}
	for _, t := range s.PerCPU {
		if p, ok := prev.CPU(t.CPU); ok {
			d.PerCPU = append(d.PerCPU, subTimes(t, p))
		}
	}
	return d
}

func subTimes(a, b CPUTimes) CPUTimes {
	return CPUTimes{CPU: a.CPU, User: a.User - b.User, Nice: a.Nice - b.Nice, System: a.System - b.System,
		Idle: a.Idle - b.Idle, IOWait: a.IOWait - b.IOWait, IRQ: a.IRQ - b.IRQ, SoftIRQ: a.SoftIRQ - b.SoftIRQ, Steal: a.Steal - b.Steal}
}

// ProcessStart is when pid started. starttime in /proc/PID/stat counts
// clock ticks since boot; it is compared with CLOCK_BOOTTIME now rather than
// added to btime, because btime is rounded to whole seconds and would put
// up to a second of error into "time to attach".
func (fs FS) ProcessStart(pid int) (time.Time, error) {
	raw, err := fs.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, err
	}
	ticks, err := parseStartTime(raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &now); err != nil {
		return time.Time{}, err
	}
	sinceBoot := time.Duration(now.Nano())
	started := time.Duration(ticks) * time.Second / userHZ
	return time.Now().Add(started - sinceBoot), nil
}

// ProcessStartTicks is pid's starttime in clock ticks since boot, exactly
// as the kernel reports it: with the pid, it identifies a process across
// pid reuse.
func (fs FS) ProcessStartTicks(pid int) (uint64, error) {
	raw, err := fs.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseStartTime(raw)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ticks, nil
}

// ProcessRuns says whether pid is still the process that started at start
// (ticks since boot, ProcessStartTicks) and has not exited: a zombie,
// killed but not yet reaped by its parent, no longer runs.
func (fs FS) ProcessRuns(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	raw, err := fs.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	ticks, err := parseStartTime(raw)
	if err != nil || ticks != start {
		return false
	}
	i := strings.LastIndexByte(raw, ')')
	state := strings.Fields(raw[i+1:])
	return len(state) > 0 && state[0] != "Z" && state[0] != "X"
}

// parseStartTime reads field 22 (starttime) of a /proc/PID/stat line.
func parseStartTime(raw string) (uint64, error) {
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after the last ')'.
	i := strings.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(raw[i+1:])
	const startTimeField = 22 - 3 // field 22, counted from field 3
	if len(f) <= startTimeField {
		return 0, fmt.Errorf("too few fields")
	}
	return strconv.ParseUint(f[startTimeField], 10, 64)
}
