package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// must is a filter whose argument the test knows to be good.
func must(f Filter, err error) Filter {
	if err != nil {
		panic(err)
	}
	return f
}

func TestSelect(t *testing.T) {
	v2 := NewIndex(FS{Root: "testdata/v2-systemd"}, nil)
	webDir := "testdata/v2-systemd/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(webPod) + ".slice/cri-containerd-" + webID + ".scope"
	cases := []struct {
		name   string
		x      *Index
		filter func() (Filter, error)
		pids   []int
		ids    []string // directories whose inodes are the cgroup ids
	}{
		{"cgroup subtree", v2, func() (Filter, error) { return CgroupFilter("/kubepods.slice/kubepods-burstable.slice") }, []int{101, 102, 112, 113}, []string{
			webDir, strings.Replace(webDir, webID, webPause, 1),
			"testdata/v2-systemd/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(apiPod) + ".slice/cri-containerd-" + apiID + ".scope"}},
		{"cgroup directory", v2, func() (Filter, error) { return CgroupFilter("/sys/fs/cgroup/system.slice/") }, []int{106, 109, 110}, nil},
		{"cgroup exact", v2, func() (Filter, error) { return CgroupFilter("/system.slice/nginx.service") }, []int{109}, []string{"testdata/v2-systemd/sys/fs/cgroup/system.slice/nginx.service"}},
		{"container prefix", v2, func() (Filter, error) { return ContainerFilter(webID[:6]) }, []int{101, 113}, []string{webDir}},
		{"container as kubectl prints it", v2, func() (Filter, error) { return ContainerFilter("containerd://" + webID) }, []int{101, 113}, []string{webDir}},
		{"container name", v2, func() (Filter, error) { return ContainerFilter("cache") }, []int{106}, nil},
		{"pod by name", v2, func() (Filter, error) { return PodFilter("shop/web-7d9f8b6c5-x2x7q") }, []int{101, 102, 113}, nil},
		{"pod by uid", v2, func() (Filter, error) { return PodFilter(webPod) }, []int{101, 102, 113}, nil},
		{"pod by systemd uid", v2, func() (Filter, error) { return PodFilter(sd(dbPod)) }, []int{103, 104}, nil},
		{"v1 pod", NewIndex(FS{Root: "testdata/v1-cgroupfs"}, nil), func() (Filter, error) { return PodFilter("shop/checkout-5f7d") }, []int{402, 403}, nil},
		{"v1 cgroup", NewIndex(FS{Root: "testdata/v1-cgroupfs"}, nil), func() (Filter, error) { return CgroupFilter("/sys/fs/cgroup/memory/docker") }, []int{401}, nil},
		// From a pod's own cgroup namespace, the host's directory names
		// the other pod.
		{"cgroup through the host's mount", NewIndex(FS{Root: "testdata/cgroupns"}, nil),
			func() (Filter, error) {
				return CgroupFilter("/host/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice")
			}, []int{601}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := must(c.filter())
			sel, err := c.x.Select(f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sel.PIDs(), c.pids) {
				t.Errorf("%s: pids %v, want %v", f, sel.PIDs(), c.pids)
			}
			for _, pid := range c.pids {
				if !sel.Contains(pid) {
					t.Errorf("Contains(%d) false", pid)
				}
			}
			if sel.Contains(1) {
				t.Error("Contains(1) true")
			}
			if c.ids != nil {
				var want []uint64
				for _, d := range c.ids {
					want = append(want, inode(t, d))
				}
				slices.Sort(want)
				if !slices.Equal(sel.CgroupIDs, want) {
					t.Errorf("cgroup ids %v, want %v", sel.CgroupIDs, want)
				}
			}
		})
	}
}

// On a v1-only host a selection has no cgroup ids: a BPF filter must use
// the pids.
func TestSelectV1HasNoCgroupIDs(t *testing.T) {
	sel, err := NewIndex(FS{Root: "testdata/v1-systemd"}, nil).Select(must(PodFilter(v1P)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.PIDs(), []int{301}) || len(sel.CgroupIDs) != 0 || len(sel.CgroupPaths) != 1 {
		t.Fatalf("%+v", sel)
	}
}

func TestSelectNothing(t *testing.T) {
	v2 := NewIndex(FS{Root: "testdata/v2-systemd"}, nil)
	for _, c := range []struct {
		filter func() (Filter, error)
		kind   error
		says   string
	}{
		{func() (Filter, error) { return ContainerFilter("4") }, ErrAmbiguous,
			"--container 4 fits 2 containers (4b5e57f6eb2f, 4cb6765c1203): give more of the id"},
		{func() (Filter, error) { return ContainerFilter("ffff") }, ErrNoMatch,
			"--container ffff: no container running on this host has that id or name (10 containers seen)"},
		{func() (Filter, error) { return PodFilter("shop/nope") }, ErrNoMatch,
			"--pod shop/nope: no process on this host is in that pod (6 pods seen)"},
		{func() (Filter, error) { return CgroupFilter("/nope.slice") }, ErrNoMatch,
			"--cgroup /nope.slice: no process is in that cgroup or below it"},
	} {
		f := must(c.filter())
		_, err := v2.Select(f)
		if !errors.Is(err, c.kind) || err.Error() != c.says {
			t.Errorf("%s: %v, want %q (%v)", f, err, c.says, c.kind)
		}
	}
	// Where nothing names pods, a name cannot match: say so, and what to
	// pass instead.
	_, err := NewIndex(FS{Root: "testdata/hybrid-systemd"}, nil).Select(must(PodFilter("shop/web")))
	want := "--pod shop/web: 1 pod seen, but neither the container runtimes' state nor the Kubernetes API named them; pass the pod's uid instead"
	if !errors.Is(err, ErrNoMatch) || err.Error() != want {
		t.Errorf("unnamed pods: %v, want %q", err, want)
	}
}

func TestFilterArguments(t *testing.T) {
	for _, bad := range []func() (Filter, error){
		func() (Filter, error) { return CgroupFilter("kubepods.slice") },
		func() (Filter, error) { return ContainerFilter("") },
		func() (Filter, error) { return ContainerFilter("a/b") },
		func() (Filter, error) { return PodFilter("web") },
		func() (Filter, error) { return PodFilter("Shop/web") },
		func() (Filter, error) { return PodFilter("shop/") },
	} {
		f, err := bad()
		if !errors.Is(err, ErrBadFilter) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%+v: %v, want one sentence wrapping ErrBadFilter", f, err)
		}
	}
	f := must(PodFilter(sd(webPod)))
	if f.Value != webPod {
		t.Errorf("a systemd-style uid is not normalised: %q", f.Value)
	}
	f = must(CgroupFilter("//kubepods.slice//x/"))
	if f.Value != "/kubepods.slice/x" {
		t.Errorf("cgroup path not cleaned: %q", f.Value)
	}
}

// fakeNamer is the Kubernetes API in short.
type fakeNamer struct {
	pods  map[string]Pod
	err   error
	calls int
}

func (f *fakeNamer) PodByUID(uid string) (Pod, bool, error) {
	f.calls++
	p, ok := f.pods[uid]
	return p, ok, f.err
}

func TestNamesFromPodNamer(t *testing.T) {
	namer := &fakeNamer{pods: map[string]Pod{apiPod: {Namespace: "shop", Name: "api-6b9f-qwert", UID: apiPod, QOSClass: "Burstable",
		Containers: map[string]string{apiID: "api"}}}}
	x := NewIndex(FS{Root: "testdata/v2-systemd"}, namer)
	w, err := x.Attribute(112)
	if err != nil {
		t.Fatal(err)
	}
	if str(w.Namespace) != "shop" || str(w.Pod) != "api-6b9f-qwert" || str(w.Container) != "api" || str(w.NamesFrom) != "kubernetes api" {
		t.Errorf("names from the API: %s/%s/%s from %s", str(w.Namespace), str(w.Pod), str(w.Container), str(w.NamesFrom))
	}
	// The runtime's state answers first: the API is not asked for a
	// container the state named.
	calls := namer.calls
	if w, _ := x.Attribute(101); str(w.NamesFrom) != "containerd state" || namer.calls != calls {
		t.Errorf("names of 101 from %s, %d API calls", str(w.NamesFrom), namer.calls-calls)
	}
	// Processes of one cgroup share one lookup.
	x.Attribute(112)
	if namer.calls != calls {
		t.Errorf("the API was asked again for a cgroup already attributed")
	}

	failing := &fakeNamer{err: fmt.Errorf("list pods: 403 Forbidden")}
	x = NewIndex(FS{Root: "testdata/v2-systemd"}, failing)
	w, err = x.Attribute(112)
	if err != nil || w.Pod != nil || w.PodUID == nil {
		t.Errorf("a failing API: %v, pod %v", err, w.Pod)
	}
	if p := x.Problems(); len(p) != 1 || !strings.Contains(p[0], "403") {
		t.Errorf("problems %v", p)
	}
}

// A runtime state file that is not JSON is a problem said once, and the
// rest of the workload still comes from the path.
func TestBrokenRuntimeState(t *testing.T) {
	root := t.TempDir()
	id := webID
	path := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(webPod) + ".slice/cri-containerd-" + id + ".scope"
	write(t, filepath.Join(root, "proc/7/cgroup"), "0::"+path+"\n")
	write(t, filepath.Join(root, "proc/self/mountinfo"), "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	write(t, filepath.Join(root, "run/containerd/io.containerd.runtime.v2.task/k8s.io", id, "config.json"), "{not json")
	x := NewIndex(FS{Root: root}, nil)
	w, err := x.Attribute(7)
	if err != nil {
		t.Fatal(err)
	}
	if str(w.ContainerID) != id || str(w.PodUID) != webPod || w.Pod != nil || w.CgroupID != nil {
		t.Errorf("%+v", w)
	}
	if p := x.Problems(); len(p) != 1 || !strings.Contains(p[0], "config.json") {
		t.Errorf("problems %v", p)
	}
}

// What attributing every process of a host costs once per run (a fresh
// index: every /proc/PID/cgroup read, every distinct cgroup's id and
// runtime state looked up), on this machine's live /proc.
func BenchmarkProcessesLive(b *testing.B) {
	n := 0
	for b.Loop() {
		procs, err := NewIndex(Default, nil).Processes()
		if err != nil {
			b.Fatal(err)
		}
		n = len(procs)
	}
	b.ReportMetric(float64(n), "processes")
}

// The same with the index warm: a filter resolved again in one run (the
// processes' cgroup files are cached; /proc is listed again).
func BenchmarkProcessesWarm(b *testing.B) {
	x := NewIndex(Default, nil)
	x.Processes()
	for b.Loop() {
		if _, err := x.Processes(); err != nil {
			b.Fatal(err)
		}
	}
}
