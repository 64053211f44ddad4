package asprof

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/jvm/attach"
)

// BusyError: a perfscope that is still running profiles the JVM. Its
// session is left alone.
type BusyError struct {
	OwnerPID int
	// OtherNamespace: the owner runs in another pid namespace (OwnerPID
	// is its pid there), where perfscope cannot tell whether it runs.
	OtherNamespace bool
	Since          time.Time
	Dir            string
}

func (e *BusyError) Error() string {
	if e.OtherNamespace {
		return fmt.Sprintf("a perfscope in another pid namespace (pid %d there) has had an async-profiler session in this JVM since %s (files in %s); it is left alone: stop that run, or remove the directory once it has ended", e.OwnerPID, e.Since.Format("15:04:05"), e.Dir)
	}
	return fmt.Sprintf("perfscope pid %d is profiling this JVM (since %s, files in %s) and is left alone: wait for it to end, or interrupt it (kill -INT %d)", e.OwnerPID, e.Since.Format("15:04:05"), e.Dir, e.OwnerPID)
}

// AlreadyRunningError: async-profiler is profiling the JVM for someone
// else than a perfscope session perfscope can judge: asprof, an agent, or
// a perfscope that recorded no owner (an older version).
type AlreadyRunningError struct {
	PID int
	// Lib is the library that profiles, as the JVM sees it.
	Lib string
}

func (e *AlreadyRunningError) Error() string {
	if perfscopeLibrary(e.Lib) {
		return fmt.Sprintf("async-profiler is already profiling this JVM, loaded from %s by a perfscope that did not stop it (killed, or a version that recorded no owner); `perfscope jvm --stop %d` stops it and removes its files", e.Lib, e.PID)
	}
	if e.Lib == "" {
		return fmt.Sprintf("async-profiler is already profiling this JVM (asprof or an agent, not perfscope); stop it first with `asprof stop %d`", e.PID)
	}
	return fmt.Sprintf("async-profiler is already profiling this JVM (loaded from %s by asprof or an agent, not perfscope); stop it first with `asprof stop %d`", e.Lib, e.PID)
}

func (e *AlreadyRunningError) Is(target error) bool { return target == ErrAlreadyRunning }

// perfscopeLibrary says whether the JVM loaded lib from a perfscope
// session directory.
func perfscopeLibrary(lib string) bool {
	dir := path.Dir(lib)
	return path.Base(lib) == libraryName && path.Dir(dir) == "/tmp" && isSessionName(path.Base(dir))
}

// mappedLibrary is an async-profiler library the JVM has mapped.
type mappedLibrary struct {
	Path    string // as the JVM sees it
	Deleted bool   // its file is gone; the JVM keeps the mapping
}

// mappedLibraries lists the async-profiler libraries the JVM has loaded.
// A JVMTI agent cannot be unloaded, so a library once loaded stays mapped
// until the JVM exits, also when its file was deleted; loading the same
// path again reuses it (the dynamic linker matches the name first).
func mappedLibraries(t *attach.Target) []mappedLibrary {
	f, err := os.Open(t.Procs().Path(fmt.Sprintf("/proc/%d/maps", t.Process.PID)))
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseMaps(bufio.NewScanner(f))
}

func parseMaps(sc *bufio.Scanner) []mappedLibrary {
	var libs []mappedLibrary
	seen := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		// address perms offset dev inode pathname: the path is what
		// follows the fifth field, and may hold spaces.
		rest := line
		for i := 0; i < 5; i++ {
			rest = strings.TrimLeft(rest, " ")
			j := strings.IndexByte(rest, ' ')
			if j < 0 {
				rest = ""
				break
			}
			rest = rest[j:]
		}
		p := strings.TrimLeft(rest, " ")
		deleted := false
		if q, ok := strings.CutSuffix(p, " (deleted)"); ok {
			p, deleted = q, true
		}
		if !strings.HasPrefix(p, "/") || path.Base(p) != libraryName || seen[p] {
			continue
		}
		seen[p] = true
		libs = append(libs, mappedLibrary{Path: p, Deleted: deleted})
	}
	return libs
}

// reusableLibrary is a library the JVM already mapped, which the session
// loads again instead of a second async-profiler: one whose file is
// still there first, else one whose file was deleted (the name still
// finds the mapping).
func reusableLibrary(libs []mappedLibrary) string {
	for _, l := range libs {
		if !l.Deleted {
			return l.Path
		}
	}
	if len(libs) > 0 {
		return libs[0].Path
	}
	return ""
}

// verdict is what a run does with a session directory it finds.
type verdict int

const (
	leave       verdict = iota // another JVM's live session, or not perfscope's to judge
	busy                       // the target's session, its perfscope still runs
	takeOver                   // the target's session, its perfscope is gone
	sweep                      // its perfscope and its JVM are both gone
	orphaned                   // its perfscope is gone; its JVM, not the target, still runs
	interrupted                // no owner file: a setup cut short
)

// judge decides what to do with a directory found in a /tmp. target is
// the JVM this run profiles (zero when sweeping perfscope's own /tmp);
// runs says whether a recorded process still runs.
func judge(f foundDir, me self, target jvmID, runs func(procID) bool) verdict {
	if f.m == nil {
		return interrupted
	}
	m := f.m
	if m.PIDNS != me.pidns {
		// Its pids mean nothing here, so whether its perfscope or its
		// JVM still runs cannot be told; the JVM is recognised by its
		// own pid and start time, the same in every pid namespace.
		if target.PID != 0 && m.JVMNSPID == target.NSPID && m.JVM.Start == target.Start {
			return busy
		}
		return leave
	}
	ownerRuns := runs(m.Owner)
	switch {
	case m.JVM == target.procID && ownerRuns:
		return busy
	case m.JVM == target.procID:
		return takeOver
	case ownerRuns:
		return leave
	case runs(m.JVM):
		return orphaned
	}
	return sweep
}

// takenOver is one session of the target whose perfscope was gone.
type takenOver struct {
	Owner int
	// Stopped: async-profiler was running and was stopped; RanFor is how
	// long it had run, when it said.
	Stopped bool
	RanFor  time.Duration
	Dir     string
	Removed bool
}

func (o takenOver) String() string {
	what := "async-profiler was not running"
	if o.Stopped {
		what = "perfscope stopped its async-profiler"
		if o.RanFor > 0 {
			what += fmt.Sprintf(" (it had run for %v)", o.RanFor.Round(time.Second))
		}
	}
	return fmt.Sprintf("perfscope pid %d ended without stopping its session in this JVM: %s and removed its files (%s)", o.Owner, what, o.Dir)
}

// reclaimed is what a pass over one /tmp did: the target's sessions taken
// over, and what it says about the others.
type reclaimed struct {
	takenOver []takenOver
	notes     []string
}

// jvmID is the JVM a run targets, as owner files record it.
type jvmID struct {
	procID
	NSPID int
}

// reclaim goes through the session directories of tmp under its lock:
// the target's session of a dead perfscope is taken over (async-profiler
// stopped through the attach protocol, files removed), directories whose
// perfscope and JVM are both gone are removed, and a dead perfscope's
// session in another JVM that still runs is reported. own is this run's
// directory in tmp, where the commands' log goes (nil when tmp is not the
// target's /tmp); t is nil when no JVM is targeted. A target session whose
// perfscope still runs is a *BusyError, and nothing is touched.
func reclaim(ctx context.Context, tmp int, me self, t *attach.Target, own *sessionDir, procs procfs.FS) (reclaimed, error) {
	var r reclaimed
	skip := ""
	if own != nil {
		skip = own.name
	}
	found, err := listSessionDirs(tmp, skip, me)
	if err != nil {
		return r, fmt.Errorf("list /tmp: %w", err)
	}
	defer func() {
		for _, f := range found {
			f.d.close()
		}
	}()
	var target jvmID
	if t != nil {
		if target, err = targetID(t); err != nil {
			return r, err
		}
	}
	runs := func(p procID) bool { return procs.ProcessRuns(p.PID, p.Start) }
	verdicts := make([]verdict, len(found))
	for i, f := range found {
		verdicts[i] = judge(f, me, target, runs)
		if verdicts[i] == busy {
			return r, &BusyError{OwnerPID: f.m.Owner.PID, OtherNamespace: f.m.PIDNS != me.pidns, Since: f.m.Created, Dir: f.d.path()}
		}
	}
	var errs []error
	for i, f := range found {
		switch verdicts[i] {
		case takeOver:
			stopped, ranFor, err := stopLibrary(ctx, t, f.m.Lib, own)
			if err != nil {
				errs = append(errs, fmt.Errorf("stop the async-profiler perfscope pid %d left running: %w", f.m.Owner.PID, err))
				continue // its files stay, so that a later run can retry
			}
			gone, err := f.d.remove()
			if err != nil {
				errs = append(errs, err)
			}
			r.takenOver = append(r.takenOver, takenOver{Owner: f.m.Owner.PID, Stopped: stopped, RanFor: ranFor, Dir: f.d.path(), Removed: gone})
		case sweep:
			if gone, err := f.d.remove(); err != nil {
				errs = append(errs, err)
			} else if gone {
				r.notes = append(r.notes, fmt.Sprintf("removed %s, left by perfscope pid %d, which ended without removing it, profiling pid %d, which has exited", f.d.path(), f.m.Owner.PID, f.m.JVM.PID))
			}
		case orphaned:
			r.notes = append(r.notes, fmt.Sprintf("perfscope pid %d ended without stopping its async-profiler session in pid %d, which still runs (files in %s): `perfscope jvm --stop %d` stops it", f.m.Owner.PID, f.m.JVM.PID, f.d.path(), f.m.JVM.PID))
		case interrupted:
			f.d.remove()
		}
	}
	return r, errors.Join(errs...)
}

func newMarker(me self, jvm jvmID, jvmUID int) marker {
	return marker{Owner: me.id, PIDNS: me.pidns, Created: time.Now(), JVM: jvm.procID, JVMNSPID: jvm.NSPID, JVMUID: jvmUID}
}

// targetID is the JVM as owner files record it.
func targetID(t *attach.Target) (jvmID, error) {
	start, err := t.Procs().ProcessStartTicks(t.Process.PID)
	if err != nil {
		return jvmID{}, fmt.Errorf("pid %d: %w", t.Process.PID, attach.ErrNoProcess)
	}
	return jvmID{procID: procID{PID: t.Process.PID, Start: start}, NSPID: t.Process.NSPID}, nil
}

var ranForRe = regexp.MustCompile(`Profiling stopped after (\d+) seconds`)

// stopLibrary stops async-profiler in the JVM through the library lib
// (as the JVM sees it) with the command log in dir. A library the JVM
// has not mapped was never loaded, and is not loaded now: nothing to
// stop. It reports whether the profiler was running.
func stopLibrary(ctx context.Context, t *attach.Target, lib string, dir *sessionDir) (bool, time.Duration, error) {
	if lib == "" || dir == nil {
		return false, 0, nil
	}
	mapped := false
	for _, l := range mappedLibraries(t) {
		mapped = mapped || l.Path == lib
	}
	if !mapped {
		return false, 0, nil
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	dir.truncate(logFile)
	msg, err := t.Load(stopCtx, lib, "stop,log="+dir.jvmPath(logFile))
	b, _ := dir.readFile(logFile, 1<<20)
	log := string(b)
	if err != nil {
		var le *attach.LoadError
		if errors.As(err, &le) && le.Status == 0 && strings.Contains(log+le.Message, "not active") {
			return false, 0, nil
		}
		return false, 0, fmt.Errorf("%w%s", err, logSuffixOf(msg, log))
	}
	var ranFor time.Duration
	if m := ranForRe.FindStringSubmatch(msg + log); m != nil {
		s, _ := strconv.Atoi(m[1])
		ranFor = time.Duration(s) * time.Second
	}
	return true, ranFor, nil
}

func logSuffixOf(reply, log string) string {
	msg := strings.TrimSpace(reply + "\n" + strings.TrimSpace(log))
	if msg == "" {
		return ""
	}
	return " (async-profiler: " + strings.ReplaceAll(msg, "\n", "; ") + ")"
}

// sweepOwnTmp removes the dead sessions of exited JVMs in perfscope's own
// /tmp when it is not the JVM's, which the session setup goes through.
func sweepOwnTmp(ctx context.Context, jvmTmp int, me self) []string {
	tmp, err := openTmp("/tmp")
	if err != nil {
		return nil
	}
	defer unix.Close(tmp)
	if sameFile(tmp, jvmTmp) {
		return nil
	}
	unlock, err := lockTmp(ctx, tmp, "/tmp")
	if err != nil {
		return nil
	}
	defer unlock()
	r, err := reclaim(ctx, tmp, me, nil, nil, procfs.Default)
	if err != nil {
		r.notes = append(r.notes, "cleaning up perfscope's /tmp: "+err.Error())
	}
	return r.notes
}

// StopReport is what StopLeftover found in a JVM and did.
type StopReport struct {
	// Owners are the perfscope runs whose sessions were taken over.
	Owners []int
	// Stopped: async-profiler was profiling for perfscope and is stopped.
	Stopped bool
	// RanFor is how long it had profiled, when async-profiler said.
	RanFor time.Duration
	// Removed are the session directories removed, as the JVM sees them.
	Removed []string
	// Foreign are async-profiler libraries in the JVM perfscope did not
	// load (asprof, an agent): whatever they do is left alone.
	Foreign []string
	// Notes are other sessions found on the way.
	Notes []string
}

// StopLeftover stops what a perfscope that is gone left running in the
// JVM (`perfscope jvm --stop`): its sessions are taken over as a run
// would, and async-profiler loaded from a perfscope directory without an
// owner file (a version that recorded none) is stopped too, and its
// directory removed if it is recognisably perfscope's. A session whose
// perfscope still runs is a *BusyError, left alone.
func StopLeftover(ctx context.Context, t *attach.Target) (StopReport, error) {
	var rep StopReport
	me, err := currentSelf()
	if err != nil {
		return rep, err
	}
	tmp, err := openTmp(t.HostPath("/tmp"))
	if err != nil {
		return rep, fmt.Errorf("open the JVM's /tmp: %w", err)
	}
	defer unix.Close(tmp)
	rep.Notes = sweepOwnTmp(ctx, tmp, me)
	unlock, err := lockTmp(ctx, tmp, fmt.Sprintf("pid %d's /tmp", t.Process.PID))
	if err != nil {
		return rep, err
	}
	defer unlock()
	jvm, err := targetID(t)
	if err != nil {
		return rep, err
	}
	// A directory of its own for the commands' log; it loads nothing.
	own, err := createSessionDir(tmp, me, newMarker(me, jvm, t.Process.UID), false, t.Process.UID, t.Process.GID)
	if err != nil {
		return rep, err
	}
	defer func() {
		own.remove()
		own.close()
	}()
	if err := own.handOver(); err != nil {
		return rep, err
	}
	r, err := reclaim(ctx, tmp, me, t, own, t.Procs())
	for _, o := range r.takenOver {
		rep.Owners = append(rep.Owners, o.Owner)
		rep.Stopped = rep.Stopped || o.Stopped
		rep.RanFor = max(rep.RanFor, o.RanFor)
		if o.Removed {
			rep.Removed = append(rep.Removed, o.Dir)
		}
	}
	rep.Notes = append(rep.Notes, r.notes...)
	if err != nil {
		return rep, err
	}
	for _, l := range mappedLibraries(t) {
		if !perfscopeLibrary(l.Path) {
			rep.Foreign = append(rep.Foreign, l.Path)
			continue
		}
		// A perfscope directory without an owner file: the JVM's files
		// there are found before the stop closes them.
		unowned := openUnownedDir(tmp, me, t, l.Path)
		var held []string
		if unowned != nil {
			held = unowned.heldBy(t)
		}
		stopped, ranFor, err := stopLibrary(ctx, t, l.Path, own)
		if err != nil {
			unowned.close()
			return rep, fmt.Errorf("stop the async-profiler loaded from %s: %w", l.Path, err)
		}
		if stopped {
			rep.Stopped = true
			rep.RanFor = max(rep.RanFor, ranFor)
		}
		if unowned != nil {
			switch gone, left := unowned.removeUnowned(held); {
			case gone:
				rep.Removed = append(rep.Removed, unowned.path())
			case len(held) > 0 && left:
				rep.Notes = append(rep.Notes, fmt.Sprintf("removed this JVM's files from %s; the directory stays: it holds other files, perhaps of another JVM's session", unowned.path()))
			}
			unowned.close()
		}
	}
	return rep, nil
}

// legacyFile names what a perfscope that recorded no owner file put in
// its directory: the library, <id>.jfr, .log and .collapsed, and a
// temporary .<id>.so.
var legacyFile = regexp.MustCompile(`^(libasyncProfiler\.so|([0-9a-f]{12})\.(jfr|log|collapsed)|\.[0-9a-f]{12}\.so)$`)

// openUnownedDir opens the directory the JVM loaded lib from when it is a
// perfscope directory without an owner file (a version that recorded
// none): a real directory of the JVM's user or of root, named after the
// first 12 hex digits of the library's SHA-256 (if the library is still
// there), holding only what that version put there. nil otherwise.
func openUnownedDir(tmp int, me self, t *attach.Target, lib string) *sessionDir {
	name := path.Base(path.Dir(lib))
	d, err := openSessionDir(tmp, name, me)
	if err != nil {
		return nil
	}
	if _, err := d.readMarker(); !errors.Is(err, unix.ENOENT) || (d.uid != t.Process.UID && d.uid != me.euid) {
		d.close()
		return nil // one with an owner file is judged by it
	}
	names, err := d.names()
	if err != nil {
		d.close()
		return nil
	}
	for _, n := range names {
		if !legacyFile.MatchString(n) {
			d.close()
			return nil
		}
	}
	if b, err := d.readFile(libraryName, 64<<20); err == nil {
		if sum := sha256.Sum256(b); dirPrefix+hex.EncodeToString(sum[:6]) != name {
			d.close()
			return nil
		}
	}
	return d
}

// names lists the directory.
func (d *sessionDir) names() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), d.name)
	defer f.Close()
	return f.Readdirnames(-1)
}

// heldBy lists the session ids of the files in the directory that the
// JVM holds open (its recording and log): that version put the files of
// several JVMs' sessions in one directory, and only this JVM's are this
// JVM's to remove. Files are matched by device and inode, which do not
// depend on the mount namespace the JVM sees them in.
func (d *sessionDir) heldBy(t *attach.Target) []string {
	type key struct{ dev, ino uint64 }
	names, _ := d.names()
	byInode := map[key]string{}
	for _, n := range names {
		m := legacyFile.FindStringSubmatch(n)
		var st unix.Stat_t
		if m == nil || m[2] == "" || unix.Fstatat(d.fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		byInode[key{st.Dev, st.Ino}] = m[2]
	}
	fdDir := t.Procs().Path(fmt.Sprintf("/proc/%d/fd", t.Process.PID))
	entries, _ := os.ReadDir(fdDir)
	seen := map[string]bool{}
	var ids []string
	for _, e := range entries {
		var st unix.Stat_t
		if unix.Stat(fdDir+"/"+e.Name(), &st) != nil {
			continue
		}
		if id, ok := byInode[key{st.Dev, st.Ino}]; ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// removeUnowned removes the files of the sessions ids, and then the
// library and the directory when nothing else is left. It says whether
// the directory is gone, and whether other files were left.
func (d *sessionDir) removeUnowned(ids []string) (gone, left bool) {
	for _, id := range ids {
		for _, ext := range []string{".jfr", ".log", ".collapsed"} {
			unix.Unlinkat(d.fd, id+ext, 0)
		}
	}
	names, err := d.names()
	if err != nil {
		return false, true
	}
	for _, n := range names {
		if n != libraryName {
			return false, true
		}
	}
	unix.Unlinkat(d.fd, libraryName, 0)
	var st unix.Stat_t
	if unix.Fstatat(d.tmp, d.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != d.dev || st.Ino != d.ino {
		return false, false
	}
	return unix.Unlinkat(d.tmp, d.name, unix.AT_REMOVEDIR) == nil, false
}
