package apply

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/auditnetlink"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
)

// --- thread affinity: sched_setaffinity(2) ------------------------------------------

type threadHandler struct{}

func (threadHandler) read(s *System, c diagnose.Change) (state, error) {
	th, err := need(s.Threads, "threads")
	if err != nil {
		return state{}, err
	}
	id, ok, err := th.Identity(c.TID)
	if err != nil {
		return state{}, err
	}
	if !ok {
		return state{gone: true}, nil
	}
	cpus, err := th.Affinity(c.TID)
	if errors.Is(err, unix.ESRCH) {
		return state{gone: true}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("read affinity of thread %d: %w", c.TID, err)
	}
	return state{value: cpus.List(), saved: &Saved{Thread: &id}}, nil
}

func (threadHandler) guard(*System, diagnose.Change, state) error { return nil }

func (threadHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	cpus, err := cpuset.ParseList(value)
	if err != nil {
		return err
	}
	if err := s.Threads.SetAffinity(c.TID, cpus); err != nil {
		return fmt.Errorf("set affinity of thread %d to %s: %w", c.TID, value, err)
	}
	return nil
}

func (threadHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	a, errA := cpuset.ParseList(value)
	b, errB := cpuset.ParseList(st.value)
	return errA == nil && errB == nil && a.Equal(b)
}

type kernelThreads struct{ root string }

// Identity reads /proc/TID/stat: the start time (field 22) tells this
// thread from a later one that reused the TID.
func (k kernelThreads) Identity(tid int) (ThreadIdentity, bool, error) {
	b, err := os.ReadFile(filepath.Join(k.root, "/proc", strconv.Itoa(tid), "stat"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return ThreadIdentity{}, false, nil
	}
	if err != nil {
		return ThreadIdentity{}, false, err
	}
	text := string(b)
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open {
		return ThreadIdentity{}, false, fmt.Errorf("/proc/%d/stat: no comm", tid)
	}
	fields := strings.Fields(text[end+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return ThreadIdentity{}, false, fmt.Errorf("/proc/%d/stat: %d fields", tid, len(fields)+2)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return ThreadIdentity{}, false, fmt.Errorf("/proc/%d/stat: start time %q", tid, fields[19])
	}
	return ThreadIdentity{StartTime: start, Comm: text[open+1 : end]}, true, nil
}

func (kernelThreads) Affinity(tid int) (cpuset.Set, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return cpuset.Set{}, err
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpuset.Of(cpus...), nil
}

func (kernelThreads) SetAffinity(tid int, cpus cpuset.Set) error {
	var set unix.CPUSet
	for _, c := range cpus.CPUs() {
		if c >= len(set)*64 {
			return fmt.Errorf("CPU %d beyond %d", c, len(set)*64)
		}
		set.Set(c)
	}
	return unix.SchedSetaffinity(tid, &set)
}

// --- audit: AUDIT_GET / AUDIT_SET over NETLINK_AUDIT ----------------------------------

type auditHandler struct{}

func (auditHandler) read(s *System, _ diagnose.Change) (state, error) {
	a, err := need(s.Audit, "audit")
	if err != nil {
		return state{}, err
	}
	v, err := a.Enabled()
	if err != nil {
		return state{}, err
	}
	return state{value: strconv.FormatUint(uint64(v), 10)}, nil
}

func (auditHandler) guard(_ *System, _ diagnose.Change, st state) error {
	if st.value == "2" {
		return errors.New("audit is locked (enabled=2) until reboot")
	}
	return nil
}

func (auditHandler) write(s *System, _ diagnose.Change, value string, _ *Saved) error {
	v, err := strconv.ParseUint(value, 10, 32)
	if err != nil || v > 1 {
		return fmt.Errorf("audit enabled %q: perfscope sets only 0 or 1", value)
	}
	return s.Audit.SetEnabled(uint32(v))
}

func (auditHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	return value == st.value
}

// netlinkAudit is the kernel's audit status over NETLINK_AUDIT.
type netlinkAudit struct{}

func (netlinkAudit) Enabled() (uint32, error) {
	st, err := auditnetlink.Get()
	return st.Enabled, err
}

func (netlinkAudit) SetEnabled(v uint32) error { return auditnetlink.SetEnabled(v) }

// --- irqbalance ban: an edit of its configuration file -----------------------------

type irqbalanceHandler struct{}

// irqbalanceMarker precedes the line perfscope appends.
const irqbalanceMarker = "# Added by perfscope udp --apply (perfscope udp --revert restores this file):"

func irqbalanceAddition(c diagnose.Change) string {
	return irqbalanceMarker + "\n" + diagnose.IrqbalanceBanLine(c) + "\n"
}

func (irqbalanceHandler) read(s *System, c diagnose.Change) (state, error) {
	p := s.path(c.Path)
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return state{}, fmt.Errorf("read %s: %w", c.Path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return state{}, err
	}
	if !st.Mode().IsRegular() || st.Size() > 1<<20 {
		return state{}, fmt.Errorf("%s is not a regular file of at most 1 MiB", c.Path)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return state{}, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	cp := &FileCopy{Contents: string(b), Mode: uint32(st.Mode().Perm()), UID: int(sys.Uid), GID: int(sys.Gid)}
	value := diagnose.ValueUnbanned
	if strings.HasSuffix(cp.Contents, irqbalanceAddition(c)) {
		value = diagnose.ValueBanned
	}
	return state{value: value, saved: &Saved{File: cp}, raw: cp.Contents}, nil
}

// guard: the ban keeps the arguments the run read; if the file now passes
// others, the run's view is stale.
func (irqbalanceHandler) guard(_ *System, c diagnose.Change, st state) error {
	args := irqbalanceArgs(st.raw)
	if !slices.Equal(args, c.Args) && !(len(args) == 0 && len(c.Args) == 0) {
		return fmt.Errorf("%s now passes %q to irqbalance, not the %q the run read", c.Path, strings.Join(args, " "), strings.Join(c.Args, " "))
	}
	return nil
}

// irqbalanceArgs are the words of the file's argument variables, read as
// collectors/irq reads them.
func irqbalanceArgs(contents string) []string {
	var args []string
	sc := bufio.NewScanner(strings.NewReader(contents))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch key {
		case "IRQBALANCE_ARGS", "OPTIONS", "IRQBALANCE_OPTS":
			args = append(args, strings.Fields(strings.Trim(strings.TrimSpace(value), `"'`))...)
		}
	}
	return args
}

func (irqbalanceHandler) write(s *System, c diagnose.Change, value string, saved *Saved) error {
	if saved == nil || saved.File == nil {
		return fmt.Errorf("no saved copy of %s", c.Path)
	}
	contents := saved.File.Contents
	if value == diagnose.ValueBanned {
		contents = bannedContents(contents, c)
	}
	return replaceFile(s.path(c.Path), contents, *saved.File)
}

func bannedContents(old string, c diagnose.Change) string {
	if old != "" && !strings.HasSuffix(old, "\n") {
		old += "\n"
	}
	return old + irqbalanceAddition(c)
}

// same: with the copy saved at --apply, exactly the file as it was
// (unbanned) or as perfscope left it (banned) — an edit by someone else
// since is neither, and the revert leaves it alone.
func (irqbalanceHandler) same(c diagnose.Change, value string, saved *Saved, st state) bool {
	if saved == nil || saved.File == nil {
		return value == st.value
	}
	if value == diagnose.ValueBanned {
		return st.raw == bannedContents(saved.File.Contents, c)
	}
	return st.raw == saved.File.Contents
}

// replaceFile writes contents to a new file beside path (O_EXCL, never
// following a link), gives it the old mode and owner, syncs it and renames
// it over path: a crash leaves the old file or the new one, never half.
func replaceFile(path, contents string, like FileCopy) error {
	d, err := safeio.OpenDir(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer d.Close()
	err = d.ReplaceFile(filepath.Base(path), fs.FileMode(like.Mode).Perm(), true, func(f *os.File) error {
		if _, err := f.WriteString(contents); err != nil {
			return err
		}
		if err := f.Chown(like.UID, like.GID); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
