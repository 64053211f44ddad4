package cgroup

import (
	"sync"

	"github.com/perfscope/perfscope/evidence"
)

// Pod is what a PodNamer knows of a pod.
type Pod struct {
	Namespace, Name, UID string
	// QOSClass is the pod's status.qosClass.
	QOSClass string
	// Containers maps a container id (without the runtime:// prefix) to
	// its name.
	Containers map[string]string
}

// PodNamer names a pod by its uid: the Kubernetes API's list of this
// node's pods (collectors/podlist). ok is false when it knows no such pod.
type PodNamer interface {
	PodByUID(uid string) (pod Pod, ok bool, err error)
}

// Index attributes processes to their workloads for one run. Processes
// in one cgroup share one answer, and each container's runtime state is
// read once. It is safe for concurrent use.
type Index struct {
	fs    FS
	namer PodNamer

	mu        sync.Mutex
	mounts    *Mounts
	mountsErr error
	byCgroup  map[string]evidence.Workload
	byPID     map[int]Membership
	names     map[string]namesLookup
	// problems are the distinct reasons names could not be read.
	problems []string
}

type namesLookup struct {
	names Names
	ok    bool
}

// NewIndex attributes processes read below fs; namer (nil: none) names
// pods the runtimes' state does not.
func NewIndex(fs FS, namer PodNamer) *Index {
	return &Index{fs: fs, namer: namer, byCgroup: map[string]evidence.Workload{},
		byPID: map[int]Membership{}, names: map[string]namesLookup{}}
}

// Attribute says what pid belongs to. It fails only when the process does
// not exist (ErrNoProcess) or its cgroup file cannot be read; what cannot
// be learned beyond that is left null in the workload.
func (x *Index) Attribute(pid int) (evidence.Workload, error) {
	m, err := x.membership(pid)
	if err != nil {
		return evidence.Workload{}, err
	}
	return x.workload(m), nil
}

func (x *Index) membership(pid int) (Membership, error) {
	x.mu.Lock()
	m, ok := x.byPID[pid]
	x.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := x.fs.Membership(pid)
	if err != nil {
		return Membership{}, err
	}
	x.mu.Lock()
	x.byPID[pid] = m
	x.mu.Unlock()
	return m, nil
}

// chosen is the hierarchy whose path says the most about the process.
type chosen struct {
	hierarchy, path string
	layout          Layout
}

// choose picks the path that names a container or pod — the v2 path
// first, then each v1 hierarchy's (a hybrid host's runtime may place its
// containers in the v1 hierarchies only) — else one that names a systemd
// unit, else the v2 path (or the first v1 one).
func choose(m Membership) chosen {
	var all []chosen
	if m.V2 != nil {
		all = append(all, chosen{"v2", *m.V2, ParseLayout(*m.V2)})
	}
	for _, h := range m.V1 {
		all = append(all, chosen{h.Hierarchy(), h.Path, ParseLayout(h.Path)})
	}
	if len(all) == 0 {
		return chosen{}
	}
	for _, c := range all {
		if c.layout.inContainerOrPod() {
			return c
		}
	}
	for _, c := range all {
		if c.layout.Unit != "" {
			return c
		}
	}
	return all[0]
}

func (x *Index) workload(m Membership) evidence.Workload {
	c := choose(m)
	v2 := ""
	if m.V2 != nil {
		v2 = *m.V2
	}
	key := c.hierarchy + "\x00" + c.path + "\x00" + v2
	x.mu.Lock()
	w, ok := x.byCgroup[key]
	x.mu.Unlock()
	if ok {
		return w
	}
	w = x.build(c, m)
	x.mu.Lock()
	x.byCgroup[key] = w
	x.mu.Unlock()
	return w
}

func (x *Index) build(c chosen, m Membership) evidence.Workload {
	var w evidence.Workload
	if c.hierarchy == "" {
		return w
	}
	w.CgroupPath, w.CgroupHierarchy = ptr(c.path), ptr(c.hierarchy)
	if m.V2 != nil {
		if mounts, err := x.cgroupMounts(); err == nil {
			if id, err := x.fs.CgroupID(mounts, *m.V2); err == nil {
				w.CgroupID = &id
			}
		}
	}
	l := c.layout
	w.ContainerID, w.Runtime, w.Unit = opt(l.ContainerID), opt(l.Runtime), opt(l.Unit)
	w.PodUID, w.QOSClass = opt(l.PodUID), opt(l.QOSClass)
	if id := l.ContainerID; id != "" {
		if n, ok := x.containerNames(id, l.Runtime); ok {
			x.applyNames(&w, n)
		}
	}
	if w.PodUID != nil && (w.Pod == nil || (w.ContainerID != nil && w.Container == nil)) {
		x.namePod(&w)
	}
	return w
}

// applyNames fills what the runtime's state says; the cgroup path's pod
// uid, when there is one, is not overridden.
func (x *Index) applyNames(w *evidence.Workload, n Names) {
	if w.Runtime == nil {
		w.Runtime = opt(n.Runtime)
	}
	named := false
	for _, f := range []struct {
		dst **string
		v   string
	}{{&w.Container, n.Container}, {&w.Namespace, n.Namespace}, {&w.Pod, n.Pod}} {
		if f.v != "" {
			*f.dst, named = ptr(f.v), true
		}
	}
	if w.PodUID == nil && n.PodUID != "" {
		w.PodUID = ptr(n.PodUID)
	}
	if named {
		w.NamesFrom = ptr(n.Runtime + " state")
	}
}

// namePod asks the PodNamer for what the runtime's state did not say.
func (x *Index) namePod(w *evidence.Workload) {
	if x.namer == nil {
		return
	}
	p, ok, err := x.namer.PodByUID(*w.PodUID)
	if err != nil {
		x.problem(err)
		return
	}
	if !ok {
		return
	}
	filled := false
	if w.Pod == nil && p.Name != "" {
		w.Namespace, w.Pod, filled = ptr(p.Namespace), ptr(p.Name), true
	}
	if w.ContainerID != nil && w.Container == nil {
		if name := p.Containers[*w.ContainerID]; name != "" {
			w.Container, filled = ptr(name), true
		}
	}
	if w.QOSClass == nil && p.QOSClass != "" {
		w.QOSClass = ptr(p.QOSClass)
	}
	if filled && w.NamesFrom == nil {
		w.NamesFrom = ptr("kubernetes api")
	}
}

func (x *Index) containerNames(id, runtime string) (Names, bool) {
	x.mu.Lock()
	l, seen := x.names[id]
	x.mu.Unlock()
	if seen {
		return l.names, l.ok
	}
	n, ok, err := x.fs.ContainerNames(id, runtime)
	if err != nil {
		x.problem(err)
	}
	x.mu.Lock()
	x.names[id] = namesLookup{n, ok}
	x.mu.Unlock()
	return n, ok
}

func (x *Index) cgroupMounts() (Mounts, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mounts == nil && x.mountsErr == nil {
		m, err := x.fs.Mounts()
		if err != nil {
			x.mountsErr = err
			x.problems = appendDistinct(x.problems, err.Error())
		} else {
			x.mounts = &m
		}
	}
	if x.mountsErr != nil {
		return Mounts{}, x.mountsErr
	}
	return *x.mounts, nil
}

func (x *Index) problem(err error) {
	x.mu.Lock()
	x.problems = appendDistinct(x.problems, err.Error())
	x.mu.Unlock()
}

// maxProblems bounds the distinct reasons kept.
const maxProblems = 8

func appendDistinct(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	if len(list) >= maxProblems {
		return list
	}
	return append(list, s)
}

// Problems are the distinct reasons names or cgroup ids could not be
// read during the run (a runtime's state unreadable, the Kubernetes API
// refusing): what a report says was not learned, and why.
func (x *Index) Problems() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.problems...)
}

func ptr(s string) *string { return &s }

// opt is nil for "": unknown stays null.
func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
