package cgroup

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// FilterKind is what a Filter selects by.
type FilterKind int

// The filters of the measuring commands.
const (
	ByCgroup    FilterKind = iota // --cgroup PATH
	ByContainer                   // --container ID
	ByPod                         // --pod NAMESPACE/NAME or UID
)

// Filter selects processes by their workload.
type Filter struct {
	Kind FilterKind
	// Value is the flag's argument, normalised by the constructor.
	Value string
}

// String is the filter as the user wrote it: "--pod default/web".
func (f Filter) String() string {
	return [...]string{"--cgroup", "--container", "--pod"}[f.Kind] + " " + f.Value
}

// ErrBadFilter is returned (as the one sentence of a filterError) for a
// filter argument that cannot name anything: a usage error.
var ErrBadFilter = errors.New("bad filter")

// filterError is one sentence for the user that errors.Is matches to
// its kind (ErrBadFilter, ErrNoMatch, ErrAmbiguous).
type filterError struct {
	msg  string
	kind error
}

func (e *filterError) Error() string        { return e.msg }
func (e *filterError) Is(target error) bool { return target == e.kind }

func filterErrorf(kind error, format string, args ...any) error {
	return &filterError{fmt.Sprintf(format, args...), kind}
}

var (
	hexPrefix = regexp.MustCompile(`^[0-9a-f]{1,64}$`)
	podUID    = regexp.MustCompile(`^[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}$|^[0-9a-f]{32}$`)
	// dnsLabel and dnsSubdomain are Kubernetes' rules for namespace and
	// pod names.
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// CgroupFilter selects the processes in cgroup path (a path in the
// hierarchy, "/kubepods.slice/…", or a directory of a mounted cgroup
// file system) or below it.
func CgroupFilter(path string) (Filter, error) {
	if !strings.HasPrefix(path, "/") {
		return Filter{}, filterErrorf(ErrBadFilter, "--cgroup %q: want an absolute path, e.g. /system.slice/nginx.service or /sys/fs/cgroup/kubepods.slice", path)
	}
	return Filter{ByCgroup, "/" + strings.Join(components(path), "/")}, nil
}

// ContainerFilter selects a container by its id or a unique prefix of it
// (as docker does; "containerd://ID" as kubectl prints it is accepted),
// or by its name.
func ContainerFilter(arg string) (Filter, error) {
	v := arg
	if _, id, ok := strings.Cut(arg, "://"); ok {
		v = id
	}
	if v == "" || strings.ContainsAny(v, "/ \t\n") {
		return Filter{}, filterErrorf(ErrBadFilter, "--container %q: want a container id (or a prefix of it) or a container name", arg)
	}
	return Filter{ByContainer, v}, nil
}

// PodFilter selects a pod by NAMESPACE/NAME or by its uid.
func PodFilter(arg string) (Filter, error) {
	if podUID.MatchString(arg) {
		return Filter{ByPod, strings.ReplaceAll(arg, "_", "-")}, nil
	}
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || !dnsLabel.MatchString(ns) || !dnsSubdomain.MatchString(name) {
		return Filter{}, filterErrorf(ErrBadFilter, "--pod %q: want NAMESPACE/NAME (e.g. default/web-7d9f) or the pod's uid", arg)
	}
	return Filter{ByPod, arg}, nil
}

// ErrNoMatch is returned (as one sentence saying what was looked for and
// what was seen) when no process matches a filter.
var ErrNoMatch = errors.New("nothing matches")

// ErrAmbiguous is returned (as one sentence) when a container id prefix or name
// fits more than one container.
var ErrAmbiguous = errors.New("ambiguous")

// Process is one selected process and what it belongs to.
type Process struct {
	PID      int
	Workload evidence.Workload
}

// Selection is what a filter resolved to on this host now.
type Selection struct {
	Filter    Filter
	Processes []Process
	// CgroupIDs are the distinct cgroup v2 ids of the selected processes
	// when their v2 cgroup is what the filter matched (a BPF program can
	// compare bpf_get_current_cgroup_id with them); empty when the
	// workload lives in v1 hierarchies only (a hybrid host's runtime
	// leaving its containers at the v2 root): filter by PIDs then.
	CgroupIDs []uint64
	// CgroupPaths are the distinct cgroups of the selected processes.
	CgroupPaths []string
}

// PIDs are the selected processes' ids, ascending.
func (s Selection) PIDs() []int {
	out := make([]int, len(s.Processes))
	for i, p := range s.Processes {
		out[i] = p.PID
	}
	return out
}

// Contains is true when pid was selected.
func (s Selection) Contains(pid int) bool {
	_, ok := slices.BinarySearchFunc(s.Processes, pid, func(p Process, pid int) int { return p.PID - pid })
	return ok
}

// Processes lists every process under the FS root's /proc with its
// workload; processes that exit while being read are skipped.
func (x *Index) Processes() ([]Process, error) {
	entries, err := os.ReadDir(x.fs.Path("/proc"))
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		w, err := x.Attribute(pid)
		if errors.Is(err, ErrNoProcess) || errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Process{pid, w})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// Select resolves f to the processes it names, walking /proc. No match is
// ErrNoMatch with one sentence saying what was seen instead.
func (x *Index) Select(f Filter) (Selection, error) {
	procs, err := x.Processes()
	if err != nil {
		return Selection{}, err
	}
	var match func(Process) (bool, bool)
	switch f.Kind {
	case ByCgroup:
		match, err = x.cgroupMatcher(f.Value)
	case ByContainer:
		match, err = containerMatcher(f, procs)
	case ByPod:
		match = podMatcher(f.Value)
	default:
		err = filterErrorf(ErrBadFilter, "filter kind %d", f.Kind)
	}
	if err != nil {
		return Selection{}, err
	}
	sel := Selection{Filter: f}
	ids, paths := map[uint64]bool{}, map[string]bool{}
	for _, p := range procs {
		ok, byV2 := match(p)
		if !ok {
			continue
		}
		sel.Processes = append(sel.Processes, p)
		if w := p.Workload; w.CgroupPath != nil {
			paths[*w.CgroupPath] = true
			if byV2 && w.CgroupID != nil {
				ids[*w.CgroupID] = true
			}
		}
	}
	if len(sel.Processes) == 0 {
		return Selection{}, x.noMatch(f, procs)
	}
	for id := range ids {
		sel.CgroupIDs = append(sel.CgroupIDs, id)
	}
	slices.Sort(sel.CgroupIDs)
	for p := range paths {
		sel.CgroupPaths = append(sel.CgroupPaths, p)
	}
	slices.Sort(sel.CgroupPaths)
	return sel, nil
}

// cgroupMatcher matches processes whose cgroup, in any hierarchy, is
// target or below it. target may be a directory of a mounted cgroup file
// system; in the v2 hierarchy the directories are compared too, which
// holds where perfscope's cgroup namespace names the same cgroup
// differently from the mount ("/../../kubepods…").
func (x *Index) cgroupMatcher(target string) (func(Process) (bool, bool), error) {
	mounts, err := x.cgroupMounts()
	if err != nil {
		return nil, err
	}
	path := mounts.CgroupPathOf(target)
	targetDir, _ := x.fs.dir(mounts.V2, path)
	if d, ok := mountDir(mounts, target); ok {
		targetDir = d
	}
	return func(p Process) (bool, bool) {
		m, err := x.membership(p.PID)
		if err != nil {
			return false, false
		}
		if m.V2 != nil {
			if _, ok := below(path, *m.V2); ok {
				return true, true
			}
			if targetDir != "" {
				if d, _ := x.fs.dir(mounts.V2, *m.V2); d != "" {
					if _, ok := below(targetDir, d); ok {
						return true, true
					}
				}
			}
		}
		for _, h := range m.V1 {
			if _, ok := below(path, h.Path); ok {
				return true, false
			}
		}
		return false, false
	}, nil
}

// mountDir is target itself when it is a directory under a cgroup2 mount.
func mountDir(m Mounts, target string) (string, bool) {
	for _, mt := range m.V2 {
		if _, ok := below(mt.MountPoint, target); ok && mt.MountPoint != "/" {
			return target, true
		}
	}
	return "", false
}

// containerMatcher matches the one container whose id starts with the
// filter's value, or else whose name is the value.
func containerMatcher(f Filter, procs []Process) (func(Process) (bool, bool), error) {
	ids := map[string]bool{}
	if hexPrefix.MatchString(f.Value) {
		for _, p := range procs {
			if id := p.Workload.ContainerID; id != nil && strings.HasPrefix(*id, f.Value) {
				ids[*id] = true
			}
		}
	}
	if len(ids) == 0 {
		for _, p := range procs {
			if w := p.Workload; w.ContainerID != nil && w.Container != nil && *w.Container == f.Value {
				ids[*w.ContainerID] = true
			}
		}
	}
	if len(ids) > 1 {
		var list []string
		for id := range ids {
			list = append(list, short(id))
		}
		slices.Sort(list)
		return nil, filterErrorf(ErrAmbiguous, "%s fits %d containers (%s): give more of the id", f, len(ids), strings.Join(list, ", "))
	}
	return func(p Process) (bool, bool) {
		id := p.Workload.ContainerID
		return id != nil && ids[*id], p.Workload.CgroupHierarchy != nil && *p.Workload.CgroupHierarchy == "v2"
	}, nil
}

// podMatcher matches a pod by uid or by NAMESPACE/NAME.
func podMatcher(v string) func(Process) (bool, bool) {
	return func(p Process) (bool, bool) {
		w := p.Workload
		v2 := w.CgroupHierarchy != nil && *w.CgroupHierarchy == "v2"
		if w.PodUID != nil && *w.PodUID == v {
			return true, v2
		}
		return w.Namespace != nil && w.Pod != nil && *w.Namespace+"/"+*w.Pod == v, v2
	}
}

// noMatch says what f looked for and what there was instead.
func (x *Index) noMatch(f Filter, procs []Process) error {
	switch f.Kind {
	case ByContainer:
		n := distinct(procs, func(w evidence.Workload) *string { return w.ContainerID })
		return filterErrorf(ErrNoMatch, "%s: no container running on this host has that id or name (%s)", f, seen(n, "container"))
	case ByPod:
		n := distinct(procs, func(w evidence.Workload) *string { return w.PodUID })
		if !podUID.MatchString(f.Value) {
			named := distinct(procs, func(w evidence.Workload) *string { return w.Pod })
			if len(n) > 0 && len(named) == 0 {
				why := "neither the container runtimes' state nor the Kubernetes API named them"
				if p := x.Problems(); len(p) > 0 {
					why += ": " + strings.Join(p, "; ")
				}
				return filterErrorf(ErrNoMatch, "%s: %s, but %s; pass the pod's uid instead", f, seen(n, "pod"), why)
			}
		}
		return filterErrorf(ErrNoMatch, "%s: no process on this host is in that pod (%s)", f, seen(n, "pod"))
	default:
		return filterErrorf(ErrNoMatch, "%s: no process is in that cgroup or below it", f)
	}
}

func distinct(procs []Process, field func(evidence.Workload) *string) map[string]bool {
	out := map[string]bool{}
	for _, p := range procs {
		if v := field(p.Workload); v != nil {
			out[*v] = true
		}
	}
	return out
}

// seen says how many of what were seen.
func seen(set map[string]bool, what string) string {
	switch len(set) {
	case 0:
		return "no " + what + " seen"
	case 1:
		return "1 " + what + " seen"
	}
	return fmt.Sprintf("%d %ss seen", len(set), what)
}

// short is a container id as docker ps shows it.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
