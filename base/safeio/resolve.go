package safeio

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Every path perfscope writes is resolved here, one component at a time
// from "/", each name looked up in the directory opened before it and
// never through a link the kernel follows on its own:
//
//   - Each directory a name is looked up in must be owned by a trusted
//     user (Owners) and writable by nobody else — unless it is sticky, as
//     /tmp is, where others may add names but not move or replace those of
//     a trusted user. Anyone else who can write a directory on the way can
//     swap what lies below it.
//   - A symbolic link is followed only when a trusted user owns it (so
//     /var/run -> /run and /dev/stdout -> /proc/self/fd/1 work); its target
//     is resolved by the same rules. A link anyone else owns is refused,
//     whoever it points to: it is the "/tmp/u/cron -> /etc/cron.d" attack.
//   - Missing directories are created (mkdirat, mode 0755) in the
//     directory already held, and the result is opened from there: there
//     is no moment at which a path is looked up again, so a component
//     swapped after it was checked redirects nothing.
//
// Each step opens one name with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)
// where the kernel has it (5.6 and later), else openat(O_NOFOLLOW): the
// kernel never follows a link or leaves the directory, and perfscope sees
// each link itself. A relative path is resolved from the kernel's name of
// the working directory (not $PWD), so the directories above it are
// checked too; "." and ".." are taken as written, before resolution.

// Owners are the users perfscope trusts with the paths it writes: root,
// the effective user and, under sudo, the user who ran sudo (SUDO_UID) —
// who could have named any path on the command line, so their links and
// directories redirect nothing they could not have asked for directly.
type Owners []uint32

// CurrentOwners are the owners trusted by this process.
func CurrentOwners() Owners {
	o := Owners{0}
	if euid := uint32(os.Geteuid()); euid != 0 {
		o = append(o, euid)
	}
	if s := os.Getenv("SUDO_UID"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil && !slices.Contains(o, uint32(n)) {
			o = append(o, uint32(n))
		}
	}
	return o
}

// Trust reports whether uid is one of the owners.
func (o Owners) Trust(uid uint32) bool { return slices.Contains(o, uid) }

// describeUID is "uid 1000 (alice)", or "uid 1000" without a name.
func describeUID(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// checkTraversed applies the rule for a directory names are looked up in.
func (o Owners) checkTraversed(path string, st *unix.Stat_t) error {
	if !o.Trust(st.Uid) {
		return fmt.Errorf("%s is owned by %s, not by root or you: %w", path, describeUID(st.Uid), ErrUntrusted)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%s is writable by group or others without the sticky bit (mode %04o): %w", path, st.Mode&0o7777, ErrUntrusted)
	}
	return nil
}

// maxLinks bounds the links followed in one resolution, as the kernel's
// 40 does.
const maxLinks = 40

// noOpenat2 is set once openat2 is found missing (ENOSYS: a kernel before
// 5.6, or a seccomp filter that hides it); tests set it to cover the
// fallback.
var noOpenat2 atomic.Bool

// openStep opens one name in dirfd as an O_PATH descriptor without
// following it, whatever it is (a link gives the link itself).
func openStep(dirfd int, name string) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.ENOSYS {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	if name == ".." || strings.Contains(name, "/") {
		return -1, unix.EXDEV // what RESOLVE_BENEATH answers
	}
	return unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// stepStat opens name in dirfd (openStep) and stats what it opened.
func stepStat(dirfd int, name string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openStep(dirfd, name)
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// resolver walks paths by the rules above.
type resolver struct {
	owners Owners
	// create makes missing directories.
	create bool
	links  int
}

func newResolver(create bool) *resolver {
	return &resolver{owners: CurrentOwners(), create: create}
}

// heldDir is a directory opened on the way, with the path it was reached
// by (links replaced by their targets).
type heldDir struct {
	fd   int
	path string
}

// absolute makes path absolute from the kernel's working directory and
// cleans it as written.
func absolute(path string) (string, error) {
	if path == "" {
		return "", &os.PathError{Op: "open", Path: path, Err: unix.ENOENT}
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	wd, err := unix.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the working directory: %w", err)
	}
	return filepath.Join(wd, path), nil
}

// components splits a path into names ("" and "." dropped).
func components(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// follow reads the link fd (at path, stat st) when a trusted user owns it.
func (r *resolver) follow(fd int, path string, st *unix.Stat_t) (string, error) {
	if !r.owners.Trust(st.Uid) {
		return "", fmt.Errorf("%s is a symbolic link owned by %s, not by root or you: %w", path, describeUID(st.Uid), ErrUntrusted)
	}
	if r.links++; r.links > maxLinks {
		return "", &os.PathError{Op: "open", Path: path, Err: unix.ELOOP}
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: path, Err: err}
	}
	return string(buf[:n]), nil
}

// dir resolves path to a directory. It returns the directory's O_PATH
// descriptor (the caller closes it) and the path it was reached by.
func (r *resolver) dir(path string) (heldDir, error) {
	abs, err := absolute(path)
	if err != nil {
		return heldDir{}, err
	}
	var st unix.Stat_t
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = unix.Fstat(root, &st); err != nil {
			unix.Close(root)
		}
	}
	if err != nil {
		return heldDir{}, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	stack := []heldDir{{fd: root, path: "/"}}
	release := func(keep int) {
		for _, h := range stack {
			if h.fd != keep {
				unix.Close(h.fd)
			}
		}
	}
	if err := r.owners.checkTraversed("/", &st); err != nil {
		release(-1)
		return heldDir{}, err
	}
	todo := components(abs)
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1].fd)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		p := filepath.Join(cur.path, name)
		fd, st, err := stepStat(cur.fd, name)
		if errors.Is(err, unix.ENOENT) && r.create {
			if err := unix.Mkdirat(cur.fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				release(-1)
				return heldDir{}, &os.PathError{Op: "mkdir", Path: p, Err: err}
			}
			fd, st, err = stepStat(cur.fd, name)
		}
		if err != nil {
			release(-1)
			return heldDir{}, &os.PathError{Op: "open", Path: p, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := r.follow(fd, p, &st)
			unix.Close(fd)
			if err != nil {
				release(-1)
				return heldDir{}, err
			}
			if strings.HasPrefix(target, "/") {
				for len(stack) > 1 {
					unix.Close(stack[len(stack)-1].fd)
					stack = stack[:len(stack)-1]
				}
			}
			todo = append(components(target), todo...)
		case unix.S_IFDIR:
			if err := r.owners.checkTraversed(p, &st); err != nil {
				unix.Close(fd)
				release(-1)
				return heldDir{}, err
			}
			stack = append(stack, heldDir{fd: fd, path: p})
		default:
			unix.Close(fd)
			release(-1)
			return heldDir{}, &os.PathError{Op: "open", Path: p, Err: unix.ENOTDIR}
		}
	}
	top := stack[len(stack)-1]
	release(top.fd)
	return top, nil
}
