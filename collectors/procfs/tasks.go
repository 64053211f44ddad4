package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Task is one thread of a process, from /proc/PID/task/TID.
type Task struct {
	TID int
	// Comm is the thread's name (15 bytes at most: a JVM's
	// "http-nio-8080-exec-12" reads "http-nio-8080-e").
	Comm string
	// State is stat's state letter: R, S, D, I, T, t, Z, X, P.
	State byte
	// Sched is schedstat; nil when the kernel has none (CONFIG_SCHED_INFO
	// off) or the thread exited between the reads.
	Sched *SchedStat
}

// SchedStat is /proc/PID/task/TID/schedstat: the scheduler's own
// accounting of a thread since it started.
type SchedStat struct {
	// OnCPU is the time it ran; RunQueueWait the time it waited on a run
	// queue for a CPU; Timeslices the times it was given one.
	OnCPU, RunQueueWait time.Duration
	Timeslices          uint64
}

// Tasks lists the threads of process pid. A thread that exits while they
// are read is left out; a process that is gone is an error wrapping
// fs.ErrNotExist.
func (f FS) Tasks(pid int) ([]Task, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(f.Path(dir))
	if err != nil {
		return nil, fmt.Errorf("list the threads of pid %d: %w", pid, err)
	}
	var out []Task
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := f.ReadString(fmt.Sprintf("%s/%d/stat", dir, tid))
		if errors.Is(err, fs.ErrNotExist) {
			continue // exited
		}
		if err != nil {
			return nil, err
		}
		t := Task{TID: tid}
		if t.Comm, t.State, err = parseTaskStat(stat); err != nil {
			return nil, fmt.Errorf("%s/%d/stat: %w", dir, tid, err)
		}
		if raw, err := f.ReadString(fmt.Sprintf("%s/%d/schedstat", dir, tid)); err == nil {
			s, err := parseSchedstat(raw)
			if err != nil {
				return nil, fmt.Errorf("%s/%d/schedstat: %w", dir, tid, err)
			}
			t.Sched = &s
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, nil
}

// parseTaskStat reads the name and state of a stat line. The name is in
// parentheses and may itself hold spaces and parentheses, so it ends at
// the last ')'.
func parseTaskStat(s string) (comm string, state byte, err error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) || s[end+1] != ' ' {
		return "", 0, fmt.Errorf("not a stat line: %.60q", s)
	}
	return s[open+1 : end], s[end+2], nil
}

// parseSchedstat reads "on_cpu_ns run_queue_wait_ns timeslices".
func parseSchedstat(s string) (SchedStat, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return SchedStat{}, fmt.Errorf("want 3 fields, got %.60q", s)
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return SchedStat{}, fmt.Errorf("field %d of %q: %w", i+1, s, err)
		}
		v[i] = n
	}
	return SchedStat{OnCPU: time.Duration(v[0]), RunQueueWait: time.Duration(v[1]), Timeslices: v[2]}, nil
}

// ProcessState is the state letter of process pid (Z: exited, not yet
// reaped by its parent); an error wrapping fs.ErrNotExist when it is gone.
func (f FS) ProcessState(pid int) (byte, error) {
	stat, err := f.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, state, err := parseTaskStat(stat)
	return state, err
}
