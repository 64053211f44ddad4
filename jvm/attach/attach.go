// Package attach speaks HotSpot's dynamic attach protocol in pure Go: the
// mechanism jcmd and agent loaders use to make a running JVM execute a
// command (load an agent, run a diagnostic command) without restarting it.
//
// The JVM opens its attach listener lazily: a client creates the trigger
// file .attach_pid<pid> and sends SIGQUIT; the JVM then listens on the unix
// socket /tmp/.java_pid<pid>. Both paths are inside the JVM's own mount
// namespace and use the pid it sees itself as, so perfscope reaches them
// through /proc/PID/root and NStgid, which works for containers without
// entering their namespaces. SIGQUIT kills a process that does not handle
// it (a JVM run with -Xrs), so a preflight refuses before anything is sent.
package attach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/hsperf"
	"github.com/perfscope/perfscope/collectors/procfs"
)

// Errors the preflight and the protocol return; each means the target was
// left untouched (nothing was sent to it, or it answered and carried on).
var (
	ErrNoProcess = hsperf.ErrNoProcess
	// ErrNotJVM: the process is not a HotSpot JVM.
	ErrNotJVM = errors.New("not a HotSpot JVM")
	// ErrNotReady: the JVM has not finished initialising; attaching now
	// could kill it (SIGQUIT before its handler is installed).
	ErrNotReady = errors.New("the JVM has not finished starting")
	// ErrSignalNotCaught: the JVM does not handle SIGQUIT (-Xrs), so the
	// attach trigger would terminate it.
	ErrSignalNotCaught = errors.New("the JVM does not handle SIGQUIT (started with -Xrs), so attaching would kill it")
	// ErrAttachDisabled: -XX:+DisableAttachMechanism.
	ErrAttachDisabled = errors.New("the JVM has attach disabled (-XX:+DisableAttachMechanism)")
	// ErrNoListener: the trigger was sent but no attach socket appeared.
	ErrNoListener = errors.New("the JVM did not open its attach socket")
	// ErrRefused: the JVM closed the connection without answering, which
	// is how it refuses a peer whose uid/gid it does not accept (JDK 8
	// refuses every uid but its own, root included).
	ErrRefused = errors.New("the JVM refused the attach connection")
	// ErrArgTooLong: protocol version 1 limits each argument.
	ErrArgTooLong = errors.New("attach argument too long")
)

const (
	protocolVersion = "1"
	// MaxArgLength is HotSpot's per-argument limit in protocol version 1
	// (AttachOperation::arg_length_max).
	MaxArgLength = 1024
	// maxArgs is the number of arguments every version-1 request carries.
	maxArgs = 3
	sigquit = 3
)

// Target is a JVM that passed the preflight.
type Target struct {
	Process hsperf.Process
	// HsperfPath is the JVM's hsperfdata file as seen from here ("" when
	// the JVM runs with -XX:-UsePerfData).
	HsperfPath string
	fs         hsperf.FS
	// Credentials to connect with; -1 keeps perfscope's own.
	uid, gid int
	// Timeouts: for the socket to appear after the trigger, and for one
	// command's reply.
	ListenTimeout  time.Duration
	CommandTimeout time.Duration
	// beforeConnect lets tests observe the credential switch.
	socketPath string
	// NoSignal: the JVM does not handle SIGQUIT but its attach socket
	// is open (-Xrs); perfscope must never signal it.
	NoSignal bool
}

// Preflight checks that pid is a HotSpot JVM that can be attached to
// without harm, and returns it as a Target. It sends nothing to the JVM.
func Preflight(fs hsperf.FS, pid int) (*Target, error) {
	p, err := fs.Process(pid)
	if err != nil {
		return nil, err
	}
	t := &Target{Process: p, fs: fs, uid: -1, gid: -1, ListenTimeout: 5 * time.Second, CommandTimeout: 30 * time.Second}
	path, err := fs.Locate(p)
	var h *hsperf.Heap
	switch {
	case err == nil:
		t.HsperfPath = path
		snap, err := fs.Snapshot(path)
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		heap := snap.Heap()
		h = &heap
	case errors.Is(err, hsperf.ErrNotFound):
		// -XX:-UsePerfData hides the counters, not the JVM: its maps
		// still show libjvm.so.
		if !mapsLibJVM(fs, pid) {
			return nil, fmt.Errorf("pid %d (%s): %w", pid, p.Name, ErrNotJVM)
		}
	default:
		return nil, err
	}
	t.socketPath = fs.TargetPath(pid, fmt.Sprintf("/tmp/.java_pid%d", p.NSPID))
	if !p.CatchesSignal(sigquit) {
		if h == nil && p.Threads < 2 {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNotReady)
		}
		// HotSpot opens its attach socket at start-up when it runs with
		// -Xrs (AttachListener::init_at_startup), since it cannot be
		// woken by SIGQUIT later: such a JVM is attachable without any
		// signal. Without the socket, the signal would kill it.
		if !t.listening() {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrSignalNotCaught)
		}
		t.NoSignal = true
	}
	if h != nil {
		if !h.InitDone {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNotReady)
		}
		if !h.Attachable {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrAttachDisabled)
		}
	} else if p.Threads < minInitialisedThreads {
		return nil, fmt.Errorf("pid %d: %w", pid, ErrNotReady)
	}
	if os.Geteuid() == 0 && (p.UID != 0 || p.GID != 0) {
		// JDK 8 accepts only its own uid/gid; later JDKs also accept
		// root. Acting as the JVM's user satisfies both.
		t.uid, t.gid = p.UID, p.GID
	}
	return t, nil
}

// minInitialisedThreads: without hsperfdata, a HotSpot JVM that has
// started its VM thread, GC workers, Signal Dispatcher, Reference Handler
// and Finalizer is past the point where SIGQUIT is safe.
const minInitialisedThreads = 6

func mapsLibJVM(fs hsperf.FS, pid int) bool {
	b, err := os.ReadFile(filepath.Join(fs.Root, fmt.Sprintf("/proc/%d/maps", pid)))
	return err == nil && strings.Contains(string(b), "/libjvm.so")
}

// Response is the JVM's answer to one command.
type Response struct {
	// Status is the first line: 0 when the command ran.
	Status int
	// Output is everything after it.
	Output string
}

// Execute sends one command (e.g. "load", "jcmd", "properties") and
// returns the reply. Arguments beyond three are not allowed by the
// protocol; missing ones are sent empty.
func (t *Target) Execute(ctx context.Context, command string, args ...string) (Response, error) {
	if len(args) > maxArgs {
		return Response{}, fmt.Errorf("attach %s: %d arguments, the protocol carries %d", command, len(args), maxArgs)
	}
	for _, a := range append([]string{command}, args...) {
		if len(a) > MaxArgLength {
			return Response{}, fmt.Errorf("%w: %d characters, the limit is %d", ErrArgTooLong, len(a), MaxArgLength)
		}
	}
	if err := t.ensureListener(ctx); err != nil {
		return Response{}, err
	}
	conn, err := t.connect()
	if err != nil {
		return Response{}, fmt.Errorf("attach to pid %d: %w", t.Process.PID, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(t.CommandTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(encodeRequest(command, args)); err != nil {
		return Response{}, fmt.Errorf("attach %s: send: %w", command, err)
	}
	raw, err := io.ReadAll(io.LimitReader(conn, 64<<20))
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{}, fmt.Errorf("attach %s: read reply: %w", command, err)
	}
	return parseResponse(command, raw)
}

// encodeRequest builds a protocol-version-1 request: the version, the
// command and exactly three arguments, each NUL-terminated.
func encodeRequest(command string, args []string) []byte {
	var b strings.Builder
	b.WriteString(protocolVersion + "\x00" + command + "\x00")
	for i := 0; i < maxArgs; i++ {
		if i < len(args) {
			b.WriteString(args[i])
		}
		b.WriteByte(0)
	}
	return []byte(b.String())
}

func parseResponse(command string, raw []byte) (Response, error) {
	if len(raw) == 0 {
		return Response{}, fmt.Errorf("attach %s: %w", command, ErrRefused)
	}
	line, rest, _ := strings.Cut(string(raw), "\n")
	status, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return Response{}, fmt.Errorf("attach %s: reply does not start with a status: %q", command, truncate(string(raw), 200))
	}
	return Response{Status: status, Output: rest}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LoadError is an agent that the JVM loaded but whose Agent_OnAttach
// failed, or that the JVM could not load.
type LoadError struct {
	Status     int
	ReturnCode int
	Message    string
}

func (e *LoadError) Error() string {
	msg := strings.TrimSpace(e.Message)
	if e.Status != 0 {
		return fmt.Sprintf("the JVM could not load the agent (status %d): %s", e.Status, msg)
	}
	if msg != "" {
		return fmt.Sprintf("agent failed to start (return code %d): %s", e.ReturnCode, msg)
	}
	return fmt.Sprintf("agent failed to start (return code %d)", e.ReturnCode)
}

// Load loads a JVMTI agent library (absolute path as the JVM sees it) and
// passes it options; the agent's own output (async-profiler prints its
// messages there) is returned.
func (t *Target) Load(ctx context.Context, library string, options string) (string, error) {
	r, err := t.Execute(ctx, "load", library, "true", options)
	if err != nil {
		return "", err
	}
	return parseLoad(r)
}

// parseLoad reads the three shapes of a load reply:
//
//	JDK 8:    "0\n<rc>\n"                     — the agent's return code alone
//	JDK 9-20: "0\nreturn code: <rc>\n"        — failures to load: status != 0
//	JDK 21+:  "0\nreturn code: <rc>\n<agent output>" — the agent may print
//	          to the attach stream, and errors come back as text
func parseLoad(r Response) (string, error) {
	if r.Status != 0 {
		return "", &LoadError{Status: r.Status, Message: r.Output}
	}
	line, rest, _ := strings.Cut(r.Output, "\n")
	line = strings.TrimSpace(line)
	if v, ok := strings.CutPrefix(line, "return code: "); ok {
		line = v
	}
	rc, err := strconv.Atoi(line)
	if err != nil {
		return "", &LoadError{ReturnCode: -1, Message: r.Output}
	}
	if rc != 0 {
		return "", &LoadError{ReturnCode: rc, Message: rest}
	}
	return rest, nil
}

// Jcmd runs a diagnostic command ("VM.flags", "GC.heap_info").
func (t *Target) Jcmd(ctx context.Context, command string) (string, error) {
	r, err := t.Execute(ctx, "jcmd", command)
	if err != nil {
		return "", err
	}
	if r.Status != 0 {
		return "", fmt.Errorf("jcmd %s: status %d: %s", command, r.Status, strings.TrimSpace(r.Output))
	}
	return r.Output, nil
}

// ensureListener starts the JVM's attach listener unless its socket
// exists: trigger file, SIGQUIT, then wait for the socket.
func (t *Target) ensureListener(ctx context.Context) error {
	if t.listening() {
		return nil
	}
	if t.NoSignal {
		return fmt.Errorf("pid %d closed its attach socket, and it does not handle SIGQUIT (-Xrs): %w", t.Process.PID, ErrNoListener)
	}
	// The preflight ran earlier; re-check the one fact that decides
	// whether SIGQUIT is safe, in case the pid was reused since.
	p, err := t.fs.Process(t.Process.PID)
	if err != nil {
		return err
	}
	if !p.CatchesSignal(sigquit) || p.NSPID != t.Process.NSPID {
		return fmt.Errorf("pid %d changed since the preflight: %w", p.PID, ErrSignalNotCaught)
	}
	trigger, err := t.createTrigger()
	if err != nil {
		return err
	}
	defer t.removeTrigger(trigger)
	if err := unix.Kill(t.Process.PID, unix.SIGQUIT); err != nil {
		return fmt.Errorf("signal pid %d: %w", t.Process.PID, err)
	}
	deadline := time.Now().Add(t.ListenTimeout)
	for wait := 10 * time.Millisecond; ; wait = min(wait*2, 200*time.Millisecond) {
		if t.listening() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d: %w within %v (is attach disabled, or /tmp not shared with the JVM?)", t.Process.PID, ErrNoListener, t.ListenTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// listening says whether the attach socket exists and belongs to the JVM's
// user: a socket someone else planted in a shared /tmp is not the JVM.
func (t *Target) listening() bool {
	var st unix.Stat_t
	if err := unix.Stat(t.socketPath, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFSOCK && int(st.Uid) == t.Process.UID
}

// createTrigger writes .attach_pid<nspid> where the JVM looks for it: its
// working directory first, then its /tmp; owned by the JVM's user, since
// JDK 8 ignores a trigger file owned by anyone else. Both directories
// belong to the JVM's user, who could plant a link under the name (to
// /etc/shadow, which root then opened and chowned to them): so the file
// is created as that user (asUser), with that user's permissions along
// the whole path and never through a link at the name (O_NOFOLLOW).
func (t *Target) createTrigger() (string, error) {
	name := fmt.Sprintf(".attach_pid%d", t.Process.NSPID)
	dirs := []string{
		filepath.Join(t.fs.Root, fmt.Sprintf("/proc/%d/cwd", t.Process.PID)),
		t.fs.TargetPath(t.Process.PID, "/tmp"),
	}
	var firstErr error
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		err := asUser(t.uid, t.gid, func() error {
			fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o660)
			if err != nil {
				return &os.PathError{Op: "create", Path: path, Err: err}
			}
			return unix.Close(fd)
		})
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		return path, nil
	}
	return "", fmt.Errorf("create attach trigger for pid %d: %w", t.Process.PID, firstErr)
}

// removeTrigger removes the trigger file as the user who created it.
func (t *Target) removeTrigger(path string) {
	asUser(t.uid, t.gid, func() error { return os.Remove(path) })
}

func (t *Target) connect() (net.Conn, error) {
	var conn net.Conn
	err := asUser(t.uid, t.gid, func() error {
		var err error
		conn, err = net.DialTimeout("unix", t.socketPath, 5*time.Second)
		return err
	})
	return conn, err
}

// HostPath is where a path inside the JVM's mount namespace is seen from
// here.
func (t *Target) HostPath(p string) string { return t.fs.TargetPath(t.Process.PID, p) }

// Procs reads the processes of the root the JVM was found under: with a
// pid, a process's start time tells it apart from a later one reusing
// the pid.
func (t *Target) Procs() procfs.FS {
	root := t.fs.Root
	if root == "" {
		root = "/"
	}
	return procfs.FS{Root: root}
}
