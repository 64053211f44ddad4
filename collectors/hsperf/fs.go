package hsperf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FS finds processes and their hsperfdata below Root ("/" on a live
// system, a fixture tree in tests).
type FS struct {
	Root string
}

// Default reads the live system.
var Default = FS{Root: "/"}

func (f FS) path(p string) string { return filepath.Join(f.Root, p) }

// ErrNoProcess: the pid is not running.
var ErrNoProcess = errors.New("no such process")

// Process is what /proc/PID/status says about a process that matters for
// reaching a JVM: who it runs as, the pid it knows itself by, and whether it
// handles SIGQUIT (the attach trigger).
type Process struct {
	PID  int
	Name string
	// NSPID is the pid in the process's own (innermost) pid namespace: the
	// JVM names its files after it.
	NSPID int
	// UID and GID are the effective ids; the attach listener checks them.
	UID, GID int
	// SigCaught is the SigCgt mask: bit n-1 is set when signal n has a
	// handler.
	SigCaught uint64
	Threads   int
	// Exited: the process has exited and is not yet reaped (a zombie).
	Exited bool
}

// CatchesSignal says whether the process installed a handler for sig. A JVM
// started with -Xrs does not catch SIGQUIT, and SIGQUIT's default action
// kills it.
func (p Process) CatchesSignal(sig int) bool {
	return sig > 0 && sig <= 64 && p.SigCaught&(1<<(sig-1)) != 0
}

// Process reads /proc/PID/status.
func (f FS) Process(pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	fh, err := os.Open(f.path(fmt.Sprintf("/proc/%d/status", pid)))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return Process{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return Process{}, err
	}
	defer fh.Close()
	p, err := parseStatus(fh)
	if err != nil {
		return Process{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	p.PID = pid
	if p.NSPID == 0 {
		p.NSPID = pid
	}
	return p, nil
}

func parseStatus(r io.Reader) (Process, error) {
	var p Process
	var seenUID bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		var err error
		switch key {
		case "Name":
			p.Name = fields[0]
		case "NStgid":
			// One pid per nested namespace, outermost first.
			p.NSPID, err = strconv.Atoi(fields[len(fields)-1])
		case "Uid":
			if len(fields) < 2 {
				return p, fmt.Errorf("short Uid line %q", val)
			}
			p.UID, err = strconv.Atoi(fields[1])
			seenUID = true
		case "Gid":
			if len(fields) < 2 {
				return p, fmt.Errorf("short Gid line %q", val)
			}
			p.GID, err = strconv.Atoi(fields[1])
		case "SigCgt":
			p.SigCaught, err = strconv.ParseUint(fields[0], 16, 64)
		case "Threads":
			p.Threads, err = strconv.Atoi(fields[0])
		case "State":
			// Z (zombie) and X (dead): the process has exited and only
			// waits for its parent; its files are gone.
			p.Exited = fields[0] == "Z" || fields[0] == "X"
		}
		if err != nil {
			return p, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if !seenUID {
		return p, errors.New("no Uid line")
	}
	return p, nil
}

// TargetPath is where the process's root directory is seen from here: the
// JVM's /tmp is TargetPath(p, "/tmp"), also in another mount namespace.
func (f FS) TargetPath(pid int, p string) string {
	return f.path(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), p))
}

// UserName maps uid to a name with the target's own /etc/passwd: inside a
// container the JVM's user (and so its hsperfdata directory) is the
// container's, not the host's.
func (f FS) UserName(pid, uid int) (string, bool) {
	fh, err := os.Open(f.TargetPath(pid, "/etc/passwd"))
	if err != nil {
		return "", false
	}
	defer fh.Close()
	return lookupPasswd(fh, uid)
}

func lookupPasswd(r io.Reader, uid int) (string, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 3 {
			continue
		}
		if id, err := strconv.Atoi(f[2]); err == nil && id == uid {
			return f[0], true
		}
	}
	return "", false
}

// Locate finds the process's hsperfdata file, as seen from here.
func (f FS) Locate(p Process) (string, error) {
	name := strconv.Itoa(p.NSPID)
	if user, ok := f.UserName(p.PID, p.UID); ok {
		path := f.TargetPath(p.PID, filepath.Join("/tmp", "hsperfdata_"+user, name))
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	// No passwd entry (a distroless image, a numeric uid): the directory
	// is still hsperfdata_<something>, and the file is the nspid.
	matches, _ := filepath.Glob(f.TargetPath(p.PID, filepath.Join("/tmp", "hsperfdata_*", name)))
	if len(matches) == 1 {
		return matches[0], nil
	}
	if len(matches) > 1 {
		return "", fmt.Errorf("pid %d: several hsperfdata files named %s: %v", p.PID, name, matches)
	}
	return "", fmt.Errorf("pid %d: %w in %s", p.PID, ErrNotFound, f.TargetPath(p.PID, "/tmp/hsperfdata_*"))
}

// MaxFileBytes caps an hsperfdata file: HotSpot's is 64 KiB by default
// (-XX:PerfDataMemorySize), and nothing it writes comes near this.
const MaxFileBytes = 16 << 20

// ErrNotRegular is returned for an hsperfdata path that is not a regular
// file (a symlink, FIFO or device).
var ErrNotRegular = errors.New("not a regular file")

// Snapshot reads the file at path (from Locate) once. The directory
// belongs to the JVM's user, who may plant anything under the name:
// perfscope (as root) reads only a regular file, never follows a symbolic
// link in the last component (/dev/zero, another user's file), never
// waits on a FIFO, and reads at most MaxFileBytes.
func (f FS) Snapshot(path string) (*Snapshot, error) {
	b, err := readRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func readRegular(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("a symbolic link: %w", ErrNotRegular)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	fh := os.NewFile(uintptr(fd), path)
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%v: %w", st.Mode().Type(), ErrNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB: not an hsperfdata file", MaxFileBytes>>20)
	}
	return b, nil
}
