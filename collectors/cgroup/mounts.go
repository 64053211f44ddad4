package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// Mounts are the cgroup file systems perfscope can see: where the
// unified (v2) hierarchy and the v1 hierarchies are mounted, read from
// /proc/self/mountinfo.
type Mounts struct {
	// V2 are the cgroup2 mounts; V1 the cgroup (v1) mounts.
	V2, V1 []procfs.Mount
}

// Mounts reads /proc/self/mountinfo.
func (fs FS) Mounts() (Mounts, error) {
	all, err := procfs.FS{Root: fs.Path("/")}.Mounts()
	if err != nil {
		return Mounts{}, fmt.Errorf("read the cgroup mounts: %w", err)
	}
	return cgroupMounts(all), nil
}

func cgroupMounts(all []procfs.Mount) Mounts {
	var m Mounts
	for _, mt := range all {
		switch mt.FSType {
		case "cgroup2":
			m.V2 = append(m.V2, mt)
		case "cgroup":
			m.V1 = append(m.V1, mt)
		}
	}
	return m
}

// components splits a cgroup path into its names. ".." is kept as a name:
// a cgroup outside the reader's cgroup namespace is listed as
// "/../../kubepods.slice/…", and cleaning the path would make it look
// like one inside.
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// below returns the components of p below root (both cgroup paths as the
// reader's namespace names them) and whether p is root or below it.
func below(root, p string) ([]string, bool) {
	r, c := components(root), components(p)
	if len(c) < len(r) {
		return nil, false
	}
	for i := range r {
		if r[i] != c[i] {
			return nil, false
		}
	}
	return c[len(r):], true
}

// dir is the directory of cgroup path p (as the reader's cgroup
// namespace names it) under one of mounts, below the FS root; "" when
// none shows it. In its own cgroup namespace (a Kubernetes pod's, on
// cgroup v2) perfscope sees other pods' cgroups as
// "/../../kubepods-burstable.slice/…" — up to the common ancestor, then
// down — and the host's cgroup2 file system, when it is mounted in, with
// a root of "/../../../..": the ancestors between are not named, so they
// are found by name below the mount (the kubelet's pod and container
// names are unique), and a path that two directories would fit is not
// guessed at.
func (fs FS) dir(mounts []procfs.Mount, p string) (string, error) {
	pc := components(p)
	for _, mt := range mounts {
		rm := components(mt.Root)
		k, j := leadingUps(rm), leadingUps(pc)
		mp := strings.TrimSuffix(mt.MountPoint, "/")
		switch {
		case k == 0 && j == 0:
			rel, ok := below(mt.Root, p)
			if !ok || containsDotDot(rel) {
				continue
			}
			return mp + "/" + strings.Join(rel, "/"), nil
		case len(rm) == k && j <= k && !containsDotDot(pc[j:]):
			// The mount's root is k levels above the namespace's root;
			// the cgroup is below the ancestor j levels up, k-j levels
			// under the mount's root.
			pattern := globEscape(fs.Path(mp)) + strings.Repeat("/*", k-j)
			for _, c := range pc[j:] {
				pattern += "/" + globEscape(c)
			}
			matches, _ := filepath.Glob(pattern)
			switch len(matches) {
			case 0:
				continue
			case 1:
				rel, _ := filepath.Rel(fs.Path("/"), matches[0])
				return "/" + rel, nil
			default:
				return "", fmt.Errorf("cgroup %s: %d directories under %s fit it", p, len(matches), mt.MountPoint)
			}
		}
	}
	return "", nil
}

func leadingUps(c []string) int {
	n := 0
	for n < len(c) && c[n] == ".." {
		n++
	}
	return n
}

// globEscape quotes filepath.Match's metacharacters.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func containsDotDot(c []string) bool {
	for _, x := range c {
		if x == ".." {
			return true
		}
	}
	return false
}

// ErrNotVisible is returned (wrapped) when a cgroup's directory is not
// under any cgroup2 mount perfscope can see.
var ErrNotVisible = errors.New("cgroup not visible")

// CgroupID is the id of the v2 cgroup at path p (as /proc/PID/cgroup
// names it): the inode number of its directory, which is the 64-bit
// kernfs id that bpf_get_current_cgroup_id returns.
func (fs FS) CgroupID(m Mounts, p string) (uint64, error) {
	d, err := fs.dir(m.V2, p)
	if err != nil {
		return 0, err
	}
	if d == "" {
		return 0, fmt.Errorf("cgroup %s: %w (no cgroup2 mount here shows it)", p, ErrNotVisible)
	}
	st, err := os.Stat(fs.Path(d))
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", p, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.IsDir() {
		return 0, fmt.Errorf("cgroup %s: %s is not a cgroup directory", p, d)
	}
	return sys.Ino, nil
}

// CgroupPathOf turns a cgroup as the user may give it — a path in the
// hierarchy ("/kubepods.slice/…") or a directory of a mounted cgroup file
// system ("/sys/fs/cgroup/unified/kubepods.slice/…") — into the path
// /proc/PID/cgroup uses. A directory under a mount is recognised by its
// mount point; anything else is taken as a hierarchy path.
func (m Mounts) CgroupPathOf(arg string) string {
	clean := "/" + strings.Join(components(arg), "/")
	for _, mt := range append(append([]procfs.Mount(nil), m.V2...), m.V1...) {
		rel, ok := below(mt.MountPoint, clean)
		if !ok || mt.MountPoint == "/" {
			continue
		}
		return "/" + strings.Join(append(components(mt.Root), rel...), "/")
	}
	return clean
}
