// Package cgroup says what a process belongs to: its cgroup (the v2 path
// and id, or the v1 paths where that is all the host has), the container
// that cgroup is (containerd, CRI-O, Docker, Podman) or the systemd unit,
// and for Kubernetes the pod's uid and QoS class — from /proc/PID/cgroup
// and the cgroup naming conventions of the kubelet's systemd and cgroupfs
// drivers and of each runtime. Names (namespace, pod, container) come
// from the runtime's state on the node where it is readable, or from a
// PodNamer (the Kubernetes API, collectors/podlist). The Index caches
// the answers for a run and resolves the reverse question: which
// processes and cgroups a --cgroup, --container or --pod names.
//
// Every path goes through FS, whose root is "/" on a live system and a
// fixture directory in tests; parsing is split from reading.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FS reads /proc, the cgroup file systems and the container runtimes'
// state below Root.
type FS struct {
	Root string
	// State says where the container runtimes keep their state; the
	// zero value is DefaultStateDirs.
	State *StateDirs
}

// Default reads the live system.
var Default = FS{Root: "/"}

// Path joins p (absolute) onto the root.
func (fs FS) Path(p string) string {
	root := fs.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, p)
}

func (fs FS) stateDirs() StateDirs {
	if fs.State != nil {
		return *fs.State
	}
	return DefaultStateDirs()
}

// ErrNoProcess is returned (wrapped) when the pid does not exist.
var ErrNoProcess = errors.New("no such process")

// Membership is a process's place in each cgroup hierarchy, as
// /proc/PID/cgroup lists it: the unified (v2) hierarchy's path and each
// v1 hierarchy's. A pure v2 host has V2 only; a v1 host V1 only; a hybrid
// host (v1 controllers, v2 mounted at /sys/fs/cgroup/unified) both.
type Membership struct {
	// V2 is the path in the unified hierarchy ("0::PATH"); nil when the
	// kernel lists no such line.
	V2 *string
	V1 []V1Membership
}

// V1Membership is the path in one v1 hierarchy.
type V1Membership struct {
	// Controllers are the hierarchy's controllers ("cpu", "cpuacct") or
	// its name ("name=systemd").
	Controllers []string
	Path        string
}

// Hierarchy names the v1 hierarchy as evidence.Workload does: "v1:" and
// its controllers joined with commas.
func (m V1Membership) Hierarchy() string { return "v1:" + strings.Join(m.Controllers, ",") }

// Membership reads /proc/PID/cgroup.
func (fs FS) Membership(pid int) (Membership, error) {
	f, err := os.Open(fs.Path(fmt.Sprintf("/proc/%d/cgroup", pid)))
	if errors.Is(err, os.ErrNotExist) {
		return Membership{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return Membership{}, err
	}
	defer f.Close()
	m, err := parseProcCgroup(f)
	if err != nil {
		return Membership{}, fmt.Errorf("/proc/%d/cgroup: %w", pid, err)
	}
	return m, nil
}

// parseProcCgroup reads cgroups(7)'s "hierarchy-ID:controller-list:path"
// lines. The path is everything after the second colon (it may hold
// colons); a v2 cgroup removed while its process was still in it is
// suffixed " (deleted)", which is dropped.
func parseProcCgroup(r io.Reader) (Membership, error) {
	var m Membership
	sc := bufio.NewScanner(r)
	// Most files are a line or a dozen; a path may be up to PATH_MAX.
	sc.Buffer(make([]byte, 0, 1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		controllers, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || !strings.HasPrefix(path, "/") {
			return Membership{}, fmt.Errorf("line %d: malformed: %q", n, line)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return Membership{}, fmt.Errorf("line %d: hierarchy id %q", n, id)
		}
		path = strings.TrimSuffix(path, " (deleted)")
		if id == "0" && controllers == "" {
			p := path
			m.V2 = &p
			continue
		}
		if controllers == "" {
			return Membership{}, fmt.Errorf("line %d: v1 hierarchy %s without controllers", n, id)
		}
		m.V1 = append(m.V1, V1Membership{Controllers: strings.Split(controllers, ","), Path: path})
	}
	return m, sc.Err()
}
