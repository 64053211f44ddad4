package sockets

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// ErrNoProcess is returned (wrapped) when the pid does not exist.
var ErrNoProcess = errors.New("no such process")

// SocketInodes returns the inodes of the sockets pid holds open, from the
// "socket:[INODE]" links in /proc/PID/fd.
func (fs FS) SocketInodes(pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fs.Path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, e := range entries {
		target, err := os.Readlink(fs.Path(dir + "/" + e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if rest, ok := strings.CutPrefix(target, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// Owners finds, for each inode, the pids whose /proc/PID/fd holds it, in
// increasing order. Processes that exit meanwhile, or whose fds cannot be
// read, are skipped; inodes nobody holds are absent. With no inodes to
// find it reads nothing: the walk reads every descriptor of every process.
func (fs FS) Owners(inodes map[uint64]bool) (map[uint64][]int, error) {
	if len(inodes) == 0 {
		return map[uint64][]int{}, nil
	}
	entries, err := os.ReadDir(fs.Path("/proc"))
	if err != nil {
		return nil, err
	}
	out := map[uint64][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		held, err := fs.SocketInodes(pid)
		if err != nil {
			continue
		}
		for ino := range held {
			if inodes[ino] {
				out[ino] = append(out[ino], pid)
			}
		}
	}
	for _, pids := range out {
		sort.Ints(pids)
	}
	return out, nil
}

// OwnedBy returns the sockets of t whose inode pid holds.
func (t UDPTable) OwnedBy(inodes map[uint64]bool) []UDPSocket {
	var out []UDPSocket
	for _, s := range t.Sockets {
		if inodes[s.Inode] {
			out = append(out, s)
		}
	}
	return out
}

// Thread is one thread of a process and where it runs.
type Thread struct {
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// LastCPU is field 39 of /proc/PID/task/TID/stat (processor): the CPU
	// the thread last ran on.
	LastCPU int `json:"last_cpu"`
	// Allowed is Cpus_allowed_list: where the scheduler may run it.
	Allowed cpuset.Set `json:"cpus_allowed"`
}

// Threads lists the threads of pid. Threads that exit while being read are
// skipped.
func (fs FS) Threads(pid int) ([]Thread, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(fs.Path(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return nil, err
	}
	var out []Thread
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		th, err := fs.thread(pid, tid)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, th)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, nil
}

func (fs FS) thread(pid, tid int) (Thread, error) {
	base := fmt.Sprintf("/proc/%d/task/%d", pid, tid)
	stat, err := fs.ReadString(base + "/stat")
	if err != nil {
		return Thread{}, err
	}
	th, err := parseTaskStat(stat)
	if err != nil {
		return Thread{}, fmt.Errorf("%s/stat: %w", base, err)
	}
	th.TID = tid
	status, err := fs.ReadString(base + "/status")
	if err != nil {
		return Thread{}, err
	}
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if th.Allowed, err = cpuset.ParseList(v); err != nil {
				return Thread{}, fmt.Errorf("%s/status: %w", base, err)
			}
		}
	}
	return th, nil
}

// parseTaskStat reads comm and processor. comm (field 2) may contain spaces
// and parentheses, so fields are counted after the last ')'.
func parseTaskStat(stat string) (Thread, error) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return Thread{}, fmt.Errorf("malformed")
	}
	th := Thread{Comm: stat[open+1 : closing]}
	f := strings.Fields(stat[closing+1:])
	const processor = 39 - 3 // field 39, counted from field 3
	if len(f) <= processor {
		return Thread{}, fmt.Errorf("%d fields, want at least 39", len(f)+2)
	}
	cpu, err := strconv.Atoi(f[processor])
	if err != nil {
		return Thread{}, fmt.Errorf("processor %q", f[processor])
	}
	th.LastCPU = cpu
	return th, nil
}
