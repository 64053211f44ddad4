package measure

import (
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/podlist"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/probes/lockstat"
)

// liveWorkloads attributes the live system's processes; in a pod whose
// service account may list the node's pods (deploy/kubernetes/rbac.yaml)
// the Kubernetes API names the pods the runtimes' state does not.
func liveWorkloads() *cgroup.Index {
	var namer cgroup.PodNamer
	if cfg, err := podlist.InCluster("/", os.Getenv, podlist.NodeName(os.Getenv)); err == nil {
		namer = podlist.New(cfg)
	}
	return cgroup.NewIndex(cgroup.Default, namer)
}

// Workload names the cgroup, container and pod of pid (nil when it has
// none to name), as the parts name the processes they measure.
func (s Sources) Workload(pid int) *evidence.Workload { return s.workload(pid) }

// workload is what pid belongs to; nil without attribution (a replayed
// recording) or when the process is gone.
func (s Sources) workload(pid int) *evidence.Workload {
	if s.Workloads == nil || pid <= 0 {
		return nil
	}
	w, err := s.Workloads.Attribute(pid)
	if err != nil {
		return nil
	}
	return &w
}

// ResolveWorkload is --cgroup, --container or --pod (at most one given;
// none: nil) resolved to the processes it names now, before anything
// loads: two given, a filter that can name nothing, or nothing matching
// is bad input in one sentence saying what was seen instead.
func ResolveWorkload(src Sources, cgroupPath, container, pod string) (*cgroup.Selection, error) {
	var given []func() (cgroup.Filter, error)
	if cgroupPath != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.CgroupFilter(cgroupPath) })
	}
	if container != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.ContainerFilter(container) })
	}
	if pod != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.PodFilter(pod) })
	}
	switch len(given) {
	case 0:
		return nil, nil
	case 1:
		f, err := given[0]()
		if err != nil {
			return nil, MarkBadInput(err)
		}
		return SelectWorkload(src, f)
	}
	return nil, BadInput("--cgroup, --container and --pod exclude each other: give one")
}

// SelectWorkload resolves a --cgroup, --container or --pod filter to the
// processes it names now. What matches nothing, or is no filter at all,
// is bad input (exit 2) in one sentence; a run without attribution
// cannot filter.
func SelectWorkload(src Sources, f cgroup.Filter) (*cgroup.Selection, error) {
	if src.Workloads == nil {
		return nil, Unavailable("%s: this run cannot read processes' cgroups", f)
	}
	sel, err := src.Workloads.Select(f)
	switch {
	case errors.Is(err, cgroup.ErrNoMatch), errors.Is(err, cgroup.ErrAmbiguous), errors.Is(err, cgroup.ErrBadFilter):
		return nil, BadInput("%v", err)
	case err != nil:
		return nil, Unavailable("%s: %v", f, err)
	}
	return &sel, nil
}

// covers says whether pid belongs to the selection (nil: every pid does).
func (s Sources) covers(sel *cgroup.Selection, pid int) bool {
	if sel == nil {
		return true
	}
	if sel.Contains(pid) {
		return true
	}
	w := s.workload(pid)
	return w != nil && sel.Covers(pid, *w)
}

// attributeNet gives every socket-level row of a network run the workload
// of the process owning the socket — never that of the task a softirq
// interrupted — and, with a selection, keeps only the rows of sockets its
// processes own. The sockets' owners are found in one walk of /proc.
func attributeNet(src Sources, ev *evidence.NetEvidence, table sockets.UDPTable, sel *cgroup.Selection) {
	if src.Workloads == nil {
		return
	}
	byPort := map[int][]uint64{}
	inodes := map[uint64]bool{}
	for _, k := range table.Sockets {
		byPort[int(k.Local.Port())] = append(byPort[int(k.Local.Port())], k.Inode)
	}
	for _, r := range ev.Sockets.Sockets {
		inodes[r.Inode] = true
	}
	for _, d := range ev.Drops.ByPort {
		for _, ino := range byPort[d.Port] {
			inodes[ino] = true
		}
	}
	owners, _ := lockstat.SocketOwners(src.sockets(), inodes)
	owned := func(pids []int) bool {
		for _, pid := range pids {
			if src.covers(sel, pid) {
				return true
			}
		}
		return false
	}

	for i := range ev.Sockets.Sockets {
		r := &ev.Sockets.Sockets[i]
		if r.PID == 0 && len(owners[r.Inode]) > 0 {
			r.PID = firstCovered(src, sel, owners[r.Inode])
		}
		r.Workload = src.workload(r.PID)
	}

	kept := ev.Locks.Sockets[:0]
	for _, sc := range ev.Locks.Sockets {
		if sel != nil && !owned([]int{sc.Socket.PID}) {
			continue
		}
		sc.Socket.Workload = src.workload(sc.Socket.PID)
		kept = append(kept, sc)
	}
	ev.Locks.Sockets = kept
	for i := range ev.Locks.Sites {
		if s := ev.Locks.Sites[i].Socket; s != nil {
			ref := *s
			ref.Workload = src.workload(ref.PID)
			ev.Locks.Sites[i].Socket = &ref
		}
	}

	drops := ev.Drops.ByPort[:0]
	for _, d := range ev.Drops.ByPort {
		var pids []int
		for _, ino := range byPort[d.Port] {
			pids = append(pids, owners[ino]...)
		}
		if sel != nil && !owned(pids) {
			continue
		}
		d.Workload = commonWorkload(src, pids)
		drops = append(drops, d)
	}
	ev.Drops.ByPort = drops
}

// firstCovered is the lowest of pids in the selection (the lowest of all
// without one).
func firstCovered(src Sources, sel *cgroup.Selection, pids []int) int {
	sorted := append([]int(nil), pids...)
	sort.Ints(sorted)
	for _, pid := range sorted {
		if src.covers(sel, pid) {
			return pid
		}
	}
	return sorted[0]
}

// commonWorkload is the workload every one of pids belongs to; nil when
// they belong to different ones (or none could be read): a port shared
// across containers is no one container's.
func commonWorkload(src Sources, pids []int) *evidence.Workload {
	var out *evidence.Workload
	for _, pid := range pids {
		w := src.workload(pid)
		if w == nil {
			continue
		}
		if out != nil && out.Label() != w.Label() {
			return nil
		}
		out = w
	}
	return out
}

// SelectJVM is the one HotSpot JVM (a process publishing hsperfdata) among
// sel's processes: none, or several, is bad input naming what was found.
func SelectJVM(src Sources, sel *cgroup.Selection) (int, error) {
	var jvms []int
	for _, pid := range sel.PIDs() {
		proc, err := src.JVMs.Process(pid)
		if err != nil {
			continue
		}
		if _, err := src.JVMs.Locate(proc); err == nil {
			jvms = append(jvms, pid)
		}
	}
	switch len(jvms) {
	case 0:
		return 0, BadInput("%s: none of its %d processes is a HotSpot JVM publishing hsperfdata", sel.Filter, len(sel.Processes))
	case 1:
		return jvms[0], nil
	}
	return 0, BadInput("%s holds %d JVMs (pids %s): pass --pid to choose one", sel.Filter, len(jvms), joinInts(jvms))
}

// SelectGo is the one Go program perfscope can read among a workload's
// processes: none, or several, is bad input naming what was found.
func SelectGo(workload string, pids []int, fs golang.FS) (int, error) {
	var found []int
	for _, pid := range pids {
		p, err := golang.OpenProcess(fs, pid)
		if err != nil {
			continue
		}
		p.Close()
		found = append(found, pid)
	}
	switch len(found) {
	case 0:
		return 0, BadInput("%s: none of its %d processes is a Go program perfscope can read", workload, len(pids))
	case 1:
		return found[0], nil
	}
	return 0, BadInput("%s holds %d Go programs (pids %s): pass --pid to choose one", workload, len(found), joinInts(found))
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
