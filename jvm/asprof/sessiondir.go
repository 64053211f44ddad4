package asprof

// The session directory: where async-profiler's library, its log and the
// profile live in the JVM's /tmp while perfscope profiles it.
//
// The JVM reads the library and writes the profile as its own user, so
// the directory belongs to the JVM's user — and to nobody else: mode
// 0700, files 0600, because the profile is the application's allocation
// stacks. perfscope as root reaches it anyway (CAP_DAC_OVERRIDE), and a
// non-root perfscope can attach only to JVMs of its own user.
//
// A perfscope killed with SIGKILL cannot stop the profiler or remove its
// files. Each directory therefore holds an owner file naming the perfscope
// that made it (pid and start time, so a reused pid does not count, and
// its pid namespace) and the JVM it profiles; the next perfscope that
// finds the owner gone stops the profiler and removes the files, as `lab`
// reclaims a dead run's claim. The owner file belongs to the user
// perfscope runs as (root), not to the JVM's user, so the JVM's user
// cannot forge one; any other directory named like these is never
// touched, and nothing in /tmp is followed through a symbolic link.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
)

const (
	// dirPrefix names session directories: dirPrefix + 12 hex digits.
	dirPrefix = ".perfscope-asprof-"
	// The files a session directory may hold, and nothing else is
	// removed from one.
	markerFile    = "owner"
	jfrFile       = "profile.jfr"
	collapsedFile = "profile.collapsed"
	logFile       = "agent.log"
	markerMagic   = "perfscope async-profiler session 1"
	maxMarkerSize = 4 << 10
	// lockWait bounds how long a run waits for another perfscope setting
	// up a session in the same /tmp (which takes milliseconds).
	lockWait = 30 * time.Second
)

// sessionFiles are removed before the owner file, which goes last so that
// a directory interrupted while being emptied still names its owner.
var sessionFiles = []string{libraryName, jfrFile, collapsedFile, logFile}

// procID identifies a process across pid reuse.
type procID struct {
	PID   int
	Start uint64 // starttime in /proc/PID/stat, clock ticks since boot
}

// marker is a session directory's owner file.
type marker struct {
	// Owner is the perfscope that made the session; PIDNS the inode of its
	// pid namespace, in which both pids mean something.
	Owner   procID
	PIDNS   uint64
	Created time.Time
	// JVM is the profiled process as the owner saw it; JVMNSPID its pid
	// in its own namespace; JVMUID the user the directory belongs to.
	JVM      procID
	JVMNSPID int
	JVMUID   int
	// Lib is the library the session loads, as the JVM sees it: the copy
	// in the directory, or one the JVM had already mapped; "" when the
	// session loads nothing (`--stop`).
	Lib string
}

func (m marker) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n", markerMagic)
	fmt.Fprintf(&b, "owner %d %d\n", m.Owner.PID, m.Owner.Start)
	fmt.Fprintf(&b, "pidns %d\n", m.PIDNS)
	fmt.Fprintf(&b, "created %d\n", m.Created.Unix())
	fmt.Fprintf(&b, "jvm %d %d %d %d\n", m.JVM.PID, m.JVM.Start, m.JVMNSPID, m.JVMUID)
	if m.Lib != "" {
		fmt.Fprintf(&b, "lib %s\n", m.Lib)
	}
	return b.Bytes()
}

var (
	// errBadMarker: the owner file does not parse (a kill cut it short).
	errBadMarker = errors.New("not a complete perfscope session owner file")
	// errForeignMarker: the owner file is not perfscope's (another user's,
	// writable by others, or not a regular file).
	errForeignMarker = errors.New("owner file not written by perfscope")
)

func parseMarker(b []byte) (marker, error) {
	var m marker
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != markerMagic {
		return m, errBadMarker
	}
	seen := map[string]bool{}
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), " ")
		if seen[key] {
			return m, fmt.Errorf("%w: %s twice", errBadMarker, key)
		}
		seen[key] = true
		f := strings.Fields(rest)
		var err error
		switch key {
		case "owner":
			err = parseInts(f, &m.Owner.PID, &m.Owner.Start)
		case "pidns":
			err = parseInts(f, &m.PIDNS)
		case "created":
			var sec int64
			err = parseInts(f, &sec)
			m.Created = time.Unix(sec, 0)
		case "jvm":
			err = parseInts(f, &m.JVM.PID, &m.JVM.Start, &m.JVMNSPID, &m.JVMUID)
		case "lib":
			if !strings.HasPrefix(rest, "/") {
				err = errors.New("relative library path")
			}
			m.Lib = rest
		default:
			err = errors.New("unknown line " + strconv.Quote(key))
		}
		if err != nil {
			return m, fmt.Errorf("%w: %s: %v", errBadMarker, key, err)
		}
	}
	for _, k := range []string{"owner", "pidns", "created", "jvm"} {
		if !seen[k] {
			return m, fmt.Errorf("%w: no %s line", errBadMarker, k)
		}
	}
	if m.Owner.PID <= 0 || m.JVM.PID <= 0 {
		return m, fmt.Errorf("%w: pid not positive", errBadMarker)
	}
	return m, nil
}

// parseInts reads exactly len(dst) non-negative decimal fields.
func parseInts(f []string, dst ...any) error {
	if len(f) != len(dst) {
		return fmt.Errorf("%d fields, want %d", len(f), len(dst))
	}
	for i, d := range dst {
		v, err := strconv.ParseUint(f[i], 10, 63)
		if err != nil {
			return err
		}
		switch p := d.(type) {
		case *int:
			*p = int(v)
		case *uint64:
			*p = v
		case *int64:
			*p = int64(v)
		}
	}
	return nil
}

// self is this perfscope as session owner files record it.
type self struct {
	id    procID
	pidns uint64
	euid  int
	egid  int
}

func currentSelf() (self, error) {
	s := self{euid: os.Geteuid(), egid: os.Getegid()}
	s.id.PID = os.Getpid()
	start, err := procfs.Default.ProcessStartTicks(s.id.PID)
	if err != nil {
		return s, fmt.Errorf("identify this process: %w", err)
	}
	s.id.Start = start
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return s, fmt.Errorf("identify this process's pid namespace: %w", err)
	}
	s.pidns = st.Ino
	return s, nil
}

// sessionDir is one session directory, reached through descriptors: on
// its /tmp (which still reaches it once the JVM has exited and its
// /proc/PID/root is gone) and on the directory itself.
type sessionDir struct {
	tmp  int // the /tmp holding it (not owned)
	name string
	fd   int // O_RDONLY|O_DIRECTORY on the directory; -1 once closed
	dev  uint64
	ino  uint64
	uid  int // the directory's owner when opened
	// jvmUID/jvmGID own the directory and the files the JVM writes;
	// -1 when perfscope runs as the JVM's user (nothing to hand over).
	jvmUID, jvmGID int
	self           self
}

// jvmPath is a file of the directory as the JVM sees it.
func (d *sessionDir) jvmPath(file string) string { return "/tmp/" + d.name + "/" + file }

// path is the directory as the JVM sees it.
func (d *sessionDir) path() string { return "/tmp/" + d.name }

func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// isSessionName says whether name is shaped like a session directory.
func isSessionName(name string) bool {
	id, ok := strings.CutPrefix(name, dirPrefix)
	if !ok || len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// openSessionDir opens tmp/name without following a symbolic link; it
// must be a directory.
func openSessionDir(tmp int, name string, me self) (*sessionDir, error) {
	fd, err := unix.Openat(tmp, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &sessionDir{tmp: tmp, name: name, fd: fd, dev: st.Dev, ino: st.Ino, uid: int(st.Uid), jvmUID: -1, jvmGID: -1, self: me}, nil
}

func (d *sessionDir) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// private says whether only the directory's owner can enter it.
func (d *sessionDir) private() bool {
	var st unix.Stat_t
	return unix.Fstat(d.fd, &st) == nil && st.Mode&0o077 == 0
}

// createSessionDir makes a new session directory in tmp, owned by
// perfscope until handOver, holding the owner file (lib is filled in when
// the session copies the library itself) and the files the JVM will
// write, created 0600 for the JVM's user: async-profiler opens them with
// O_TRUNC, which keeps their mode and owner.
func createSessionDir(tmp int, me self, m marker, copyLib bool, jvmUID, jvmGID int, outputs ...string) (*sessionDir, error) {
	var name string
	for attempt := 0; ; attempt++ {
		name = dirPrefix + randomID()
		err := unix.Mkdirat(tmp, name, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || attempt == 4 {
			return nil, fmt.Errorf("create %s in the JVM's /tmp: %w", name, err)
		}
	}
	d, err := openSessionDir(tmp, name, me)
	if err == nil && (d.uid != me.euid || unix.Fchmod(d.fd, 0o700) != nil) {
		d.close()
		err = fmt.Errorf("/tmp/%s changed under perfscope", name)
	}
	if err != nil {
		unix.Unlinkat(tmp, name, unix.AT_REMOVEDIR)
		return nil, err
	}
	if me.euid == 0 && jvmUID >= 0 && (jvmUID != 0 || jvmGID != 0) {
		d.jvmUID, d.jvmGID = jvmUID, jvmGID
	}
	if copyLib {
		m.Lib = d.jvmPath(libraryName)
	}
	fail := func(err error) (*sessionDir, error) {
		d.remove()
		d.close()
		return nil, err
	}
	if err := d.writeFile(markerFile, m.encode(), false); err != nil {
		return fail(fmt.Errorf("write %s/%s: %w", d.path(), markerFile, err))
	}
	for _, f := range append([]string{logFile}, outputs...) {
		if err := d.writeFile(f, nil, true); err != nil {
			return fail(fmt.Errorf("create %s/%s: %w", d.path(), f, err))
		}
	}
	return d, nil
}

// handOver gives the directory to the JVM's user, last: until then it is
// perfscope's, and an interrupted setup is recognised as perfscope's.
func (d *sessionDir) handOver() error {
	if d.jvmUID < 0 {
		return nil
	}
	if err := unix.Fchown(d.fd, d.jvmUID, d.jvmGID); err != nil {
		return fmt.Errorf("give %s to the JVM's user (uid %d): %w", d.path(), d.jvmUID, err)
	}
	return nil
}

// writeFile creates name (never an existing one, never through a link)
// 0600 with data; forJVM hands it to the JVM's user.
func (d *sessionDir) writeFile(name string, data []byte, forJVM bool) error {
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if forJVM && d.jvmUID >= 0 {
		if err := f.Chown(d.jvmUID, d.jvmGID); err != nil {
			return err
		}
	}
	return f.Close()
}

// openRegular opens a regular file of the directory for reading, never
// through a link, never waiting on a FIFO the JVM's user may have put
// there.
func (d *sessionDir) openRegular(name string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: d.jvmPath(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, st, fmt.Errorf("%w: %s is not a regular file", errForeignMarker, d.jvmPath(name))
	}
	return f, st, nil
}

// readFile reads a regular file of the directory, at most max bytes when
// max > 0.
func (d *sessionDir) readFile(name string, max int64) ([]byte, error) {
	f, _, err := d.openRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	b, err := io.ReadAll(r)
	if err == nil && max > 0 && int64(len(b)) > max {
		err = fmt.Errorf("%s is larger than %d bytes", d.jvmPath(name), max)
	}
	return b, err
}

// truncate empties a file the JVM writes (the log, before each command,
// so that what it holds afterwards is that command's).
func (d *sessionDir) truncate(name string) {
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
}

// readMarker reads the owner file. It counts only if it is a regular file
// of the user perfscope runs as (or root), writable by nobody else: the
// JVM's user owns the directory and could put anything there, but not a
// file of root's.
func (d *sessionDir) readMarker() (marker, error) {
	f, st, err := d.openRegular(markerFile)
	if err != nil {
		return marker{}, err
	}
	defer f.Close()
	if (int(st.Uid) != d.self.euid && st.Uid != 0) || st.Mode&0o022 != 0 {
		return marker{}, fmt.Errorf("%w: owned by uid %d, mode %o", errForeignMarker, st.Uid, st.Mode&0o7777)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMarkerSize+1))
	if err != nil {
		return marker{}, err
	}
	if len(b) > maxMarkerSize {
		return marker{}, fmt.Errorf("%w: too large", errBadMarker)
	}
	return parseMarker(b)
}

// remove deletes the session's files by their names, relative to the
// directory (nothing is followed), the owner file last, and then the
// directory if nothing else is left in it. Before the owner file goes the
// directory is taken back from the JVM's user, so that a removal cut short
// leaves a directory still recognisably perfscope's. It reports whether
// the directory is gone.
func (d *sessionDir) remove() (bool, error) {
	for _, f := range sessionFiles {
		unix.Unlinkat(d.fd, f, 0)
	}
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) == nil && int(st.Uid) != d.self.euid && d.self.euid == 0 {
		unix.Fchown(d.fd, d.self.euid, d.self.egid)
	}
	unix.Unlinkat(d.fd, markerFile, 0)
	// The name must still be this directory: whoever owns the /tmp entry
	// could have replaced it since it was opened.
	if err := unix.Fstatat(d.tmp, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Dev != d.dev || st.Ino != d.ino {
		return false, nil
	}
	if err := unix.Unlinkat(d.tmp, d.name, unix.AT_REMOVEDIR); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true, nil
		}
		return false, fmt.Errorf("remove %s: %w", d.path(), err)
	}
	return true, nil
}

// foundDir is a session directory found in a /tmp, with its owner file
// (nil when it has none, or one cut short).
type foundDir struct {
	d *sessionDir
	m *marker
}

// listSessionDirs opens the session directories of one /tmp (skipping
// the one named skip) that can be perfscope's: real directories, private
// to their owner, whose owner file is perfscope's. One without a complete
// owner file is returned only when it belongs to the user perfscope runs
// as: an interrupted setup.
func listSessionDirs(tmp int, skip string, me self) ([]foundDir, error) {
	fd, err := unix.Openat(tmp, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(fd), "tmp")
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var found []foundDir
	for _, name := range names {
		if name == skip || !isSessionName(name) {
			continue
		}
		d, err := openSessionDir(tmp, name, me)
		if err != nil {
			continue // a link, a file, or not ours to read
		}
		if !d.private() {
			d.close()
			continue
		}
		m, err := d.readMarker()
		switch {
		case err == nil && (d.uid == m.JVMUID || d.uid == me.euid):
			found = append(found, foundDir{d: d, m: &m})
		case d.uid == me.euid && (errors.Is(err, unix.ENOENT) || errors.Is(err, errBadMarker)):
			// perfscope's own directory without a complete owner file:
			// a setup cut short (it runs under the /tmp's lock, which
			// the caller holds now, so its perfscope is gone).
			found = append(found, foundDir{d: d})
		default:
			d.close() // another user's, or unreadable: not ours to judge
		}
	}
	return found, nil
}

// openTmp opens a /tmp for sessions: read-only, so that it can be listed
// and locked. It is followed if it is a link: it is the root of its mount
// namespace's /tmp, chosen by whoever set that namespace up.
func openTmp(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// lockTmp serialises the setup of sessions in one /tmp among perfscope
// runs: finding the sessions there, taking over dead ones and creating a
// new one with its owner file happen under an exclusive flock on the /tmp
// directory itself, so a directory without an owner file can only be a
// setup whose perfscope died, and two runs never both profile one JVM.
// Nothing is created for the lock; it goes with the process. A /tmp
// whose filesystem has no flock is used without one.
func lockTmp(ctx context.Context, tmp int, what string) (func(), error) {
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(tmp, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return func() { unix.Flock(tmp, unix.LOCK_UN) }, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return func() {}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s stayed locked for %v (another perfscope setting up an async-profiler session there?)", what, lockWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sameFile says whether two descriptors are the same directory.
func sameFile(a, b int) bool {
	var sa, sb unix.Stat_t
	return unix.Fstat(a, &sa) == nil && unix.Fstat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
