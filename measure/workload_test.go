package measure

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes/cpuprofile"
)

const (
	podA = "afd61604-8ab7-750a-3199-1673716530ff"
	idA  = "4b5e57f6eb2f42b9039b3d1e13929295f231749c510cbe341cd68036d9af97e2"
	podB = "4d651f28-68b4-965a-d7a3-269628ca79ba"
	idB  = "7bdc25d1694ef984782a16f6f1710c1c6bc83ba7a131b515baf532bea021d011"
	idC  = "0c5f3e4b9d1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4"
)

// workloadHost is a /proc of four processes: 200 in pod A's containerd
// container holding socket 1111 (port 9000), 300 nginx on the host
// holding 2222 (port 53), 400 in pod B's CRI-O container and 401 in a
// plain Docker container, holding 3333 and 3334, both on port 9001.
func workloadHost(t *testing.T) (Sources, sockets.UDPTable) {
	t.Helper()
	root := t.TempDir()
	procs := []struct {
		pid    int
		cgroup string
		inode  uint64
	}{
		{200, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(podA, "-", "_") + ".slice/cri-containerd-" + idA + ".scope", 1111},
		{300, "/system.slice/nginx.service", 2222},
		{400, "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(podB, "-", "_") + ".slice/crio-" + idB + ".scope", 3333},
		{401, "/system.slice/docker-" + idC + ".scope", 3334},
	}
	for _, p := range procs {
		dir := filepath.Join(root, "proc", fmt.Sprint(p.pid))
		if err := os.MkdirAll(filepath.Join(dir, "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::"+p.cgroup+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "comm"), []byte("server\n"), 0o644)
		if err := os.Symlink(fmt.Sprintf("socket:[%d]", p.inode), filepath.Join(dir, "fd", "3")); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "proc", "self"), 0o755)
	os.WriteFile(filepath.Join(root, "proc", "self", "mountinfo"),
		[]byte("29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"), 0o644)
	table := sockets.UDPTable{Sockets: []sockets.UDPSocket{
		{Local: netip.MustParseAddrPort("127.0.0.1:9000"), Inode: 1111},
		{Local: netip.MustParseAddrPort("127.0.0.1:53"), Inode: 2222},
		{Local: netip.MustParseAddrPort("0.0.0.0:9001"), Inode: 3333},
		{Local: netip.MustParseAddrPort("0.0.0.0:9001"), Inode: 3334},
	}}
	src := Sources{Root: procfs.FS{Root: root}, Symbols: symbols.FS{Root: root},
		Workloads: cgroup.NewIndex(cgroup.FS{Root: root, State: &cgroup.StateDirs{}}, nil)}
	return src, table
}

func netEvidenceOf() evidence.NetEvidence {
	return evidence.NetEvidence{
		Sockets: evidence.SocketSection{Sockets: []evidence.UDPSocket{{Port: 9000, Inode: 1111}, {Port: 53, Inode: 2222}, {Port: 9001, Inode: 3333}}},
		Locks: evidence.LockSection{Sockets: []evidence.SocketContention{
			{Socket: evidence.SocketRef{Port: 9000, Inode: 1111, PID: 200}, TotalNs: 900},
			{Socket: evidence.SocketRef{Port: 53, Inode: 2222, PID: 300}, TotalNs: 100}}},
		Drops: evidence.DropSection{ByPort: []evidence.PortDrops{{Port: 9000, Count: 5}, {Port: 53, Count: 4}, {Port: 9001, Count: 3}}},
	}
}

func label(w *evidence.Workload) string {
	if w == nil {
		return "<none>"
	}
	return w.Label()
}

// Sockets, their lock waits and their ports' drops are each the socket
// owner's — found by inode in /proc/PID/fd, not by the task a softirq
// ran on — and a port shared by two containers is neither's.
func TestAttributeNetBySocketOwner(t *testing.T) {
	src, table := workloadHost(t)
	ev := netEvidenceOf()
	attributeNet(src, &ev, table, nil)
	for _, c := range []struct {
		what string
		got  *evidence.Workload
		want string
	}{
		{"socket 1111", ev.Sockets.Sockets[0].Workload, "pod-" + podA + "/" + idA[:12]},
		{"socket 2222", ev.Sockets.Sockets[1].Workload, "nginx.service"},
		{"socket 3333", ev.Sockets.Sockets[2].Workload, "pod-" + podB + "/" + idB[:12]},
		{"lock wait on 1111", ev.Locks.Sockets[0].Socket.Workload, "pod-" + podA + "/" + idA[:12]},
		{"lock wait on 2222", ev.Locks.Sockets[1].Socket.Workload, "nginx.service"},
		{"drops on 9000", ev.Drops.ByPort[0].Workload, "pod-" + podA + "/" + idA[:12]},
		{"drops on 53", ev.Drops.ByPort[1].Workload, "nginx.service"},
		{"drops on 9001 (two containers)", ev.Drops.ByPort[2].Workload, "<none>"},
	} {
		if got := label(c.got); got != c.want {
			t.Errorf("%s: %s, want %s", c.what, got, c.want)
		}
	}
	if ev.Sockets.Sockets[0].PID != 200 || ev.Sockets.Sockets[2].PID != 400 {
		t.Errorf("owners %d, %d: want 200, 400", ev.Sockets.Sockets[0].PID, ev.Sockets.Sockets[2].PID)
	}
	if w := ev.Sockets.Sockets[0].Workload; w.ContainerID == nil || *w.ContainerID != idA || *w.Runtime != "containerd" || *w.QOSClass != "Burstable" {
		t.Errorf("socket 1111: %+v", w)
	}
}

// A --pod selection keeps the pod's sockets, their lock waits and the
// drops of its ports, and nothing of the host's or other pods'.
func TestAttributeNetKeepsSelection(t *testing.T) {
	src, table := workloadHost(t)
	f, err := cgroup.PodFilter(podB)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := SelectWorkload(src, f)
	if err != nil {
		t.Fatal(err)
	}
	ev := netEvidenceOf()
	attributeNet(src, &ev, table, sel)
	if len(ev.Locks.Sockets) != 0 {
		t.Errorf("lock waits of other workloads kept: %+v", ev.Locks.Sockets)
	}
	if len(ev.Drops.ByPort) != 1 || ev.Drops.ByPort[0].Port != 9001 {
		t.Errorf("drops kept: %+v", ev.Drops.ByPort)
	}

	f, _ = cgroup.ContainerFilter(idA[:8])
	if sel, err = SelectWorkload(src, f); err != nil {
		t.Fatal(err)
	}
	ev = netEvidenceOf()
	attributeNet(src, &ev, table, sel)
	if len(ev.Locks.Sockets) != 1 || ev.Locks.Sockets[0].Socket.PID != 200 || len(ev.Drops.ByPort) != 1 || ev.Drops.ByPort[0].Port != 9000 {
		t.Errorf("--container %s kept locks %+v, drops %+v", idA[:8], ev.Locks.Sockets, ev.Drops.ByPort)
	}
}

// A filter that matches nothing, or cannot name anything, is bad input
// (exit 2) in one sentence; a run without attribution cannot filter.
func TestSelectWorkloadRefuses(t *testing.T) {
	src, _ := workloadHost(t)
	f, _ := cgroup.PodFilter("00000000-0000-4000-8000-000000000000")
	_, err := SelectWorkload(src, f)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "2 pods seen") {
		t.Errorf("no such pod: %v", err)
	}
	f, _ = cgroup.CgroupFilter("/nope.slice")
	if _, err := SelectWorkload(src, f); !errors.Is(err, ErrBadInput) {
		t.Errorf("no such cgroup: %v", err)
	}
	if _, err := SelectWorkload(Sources{}, f); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without attribution: %v", err)
	}
	if _, err := SelectJVM(src, &cgroup.Selection{Filter: f, Processes: []cgroup.Process{{PID: 200}}}); !errors.Is(err, ErrBadInput) ||
		!strings.Contains(err.Error(), "is a HotSpot JVM") {
		t.Errorf("no JVM: %v", err)
	}
}

// --per-container roots every stack at its process's workload and counts
// the samples per workload; a selection keeps its processes' samples and
// counts the others'.
func TestProfilePerContainer(t *testing.T) {
	src, _ := workloadHost(t)
	p := &Profile{opts: ProfileOptions{Root: cpuprofile.RootContainer}, src: src, sym: symbols.New(src.Symbols)}
	p.profile = cpuprofile.Profile{Samples: []cpuprofile.Sample{{PID: 200, Comm: "server", Count: 5}, {PID: 300, Comm: "nginx", Count: 3},
		{PID: 0, Comm: "swapper/0", Count: 1}, {PID: 200, Comm: "server", CPU: 1, Count: 2}}}
	samples := p.Samples()
	roots := map[string]uint64{}
	for _, s := range samples {
		roots[s.Frames[0]] += s.Count
	}
	wantA := "pod-" + podA + "/" + idA[:12]
	if roots[wantA] != 7 || roots["nginx.service"] != 3 || roots["host"] != 1 {
		t.Errorf("root frames %v", roots)
	}
	if len(p.workloads) != 3 || p.workloads[0].Label != wantA || p.workloads[0].Samples != 7 ||
		p.workloads[0].Workload.PodUID == nil || *p.workloads[0].Workload.PodUID != podA {
		t.Errorf("workloads %+v", p.workloads)
	}

	f, _ := cgroup.PodFilter(podA)
	sel, err := SelectWorkload(src, f)
	if err != nil {
		t.Fatal(err)
	}
	p.opts = ProfileOptions{Root: cpuprofile.RootComm, Select: sel}
	samples = p.Samples()
	var kept uint64
	for _, s := range samples {
		kept += s.Count
		if s.Frames[0] != "server" {
			t.Errorf("kept a sample of %s", s.Frames[0])
		}
	}
	if kept != 7 || p.filteredOut != 4 {
		t.Errorf("kept %d, filtered out %d; want 7 and 4", kept, p.filteredOut)
	}
	_, ev := summarizeProfile(p.opts, p.profile, samples)
	if ev.Target != "workload" || ev.Samples != 7 {
		t.Errorf("target %q, samples %d", ev.Target, ev.Samples)
	}
}
