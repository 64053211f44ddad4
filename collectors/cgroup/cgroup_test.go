package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/perfscope/perfscope/evidence"
)

// The fixtures under testdata are nodes' /proc/PID/cgroup files,
// /proc/self/mountinfo, cgroup directories (a cgroup.procs each, so git
// keeps them) and the container runtimes' state files:
//
//	podman-hybrid   recorded on this project's machine (v1 controllers,
//	                cgroup v2 at /sys/fs/cgroup/unified): a Podman
//	                container run with the cgroupfs manager (pid 354)
//	                and its conmon (344)
//	v2-systemd      cgroup v2, the kubelet's systemd driver: containerd,
//	                CRI-O (and its conmon), cri-dockerd, plain Docker and
//	                Podman (rootful, rootless), a systemd service, a kind
//	                node's nested pod, a deleted cgroup
//	v2-cgroupfs     cgroup v2, the kubelet's cgroupfs driver
//	v1-systemd      cgroup v1 only, the systemd driver
//	v1-cgroupfs     cgroup v1 only: Docker, the kubelet through dockershim
//	hybrid-systemd  systemd's hybrid mode (v2 at /sys/fs/cgroup/unified
//	                tracking the same paths)
//	cgroupns        perfscope in a pod's own cgroup namespace with the
//	                host's cgroup2 mounted at /host/sys/fs/cgroup

const (
	webID     = "4b5e57f6eb2f42b9039b3d1e13929295f231749c510cbe341cd68036d9af97e2"
	webPause  = "4cb6765c1203c6668158fbce7dc81be00e5cad5325a9adb10847c9811137993c"
	webPod    = "afd61604-8ab7-750a-3199-1673716530ff"
	dbID      = "7bdc25d1694ef984782a16f6f1710c1c6bc83ba7a131b515baf532bea021d011"
	dbPod     = "4d651f28-68b4-965a-d7a3-269628ca79ba"
	jobID     = "5e8c9902207afaeb7120430c585a445f21e92932081d64bc99f80e4925bcb002"
	jobPod    = "e5fcf7d0-55d9-d255-0a9a-f1af723fc59b"
	redisID   = "34fb46c847bb9df96e5205a39d382f648a6e8dce1e014cd85b4ca6a88d88ed03"
	podmanWeb = "f9d688036191e04636c64024ce221730446495d6568b72e14d6ebc8aa23e434f"
	rootless  = "56dfa3bc944415a972b0fe05883435f6f061150cc65600d923a24fd565932362"
	corednsID = "8a32e516d7415be524a7fcec482ad2918f2b6ef2a7f4cb8e2e232b361436b20b"
	corednsUI = "a6b20fa2-c624-ce58-03b2-e90847aac3cd"
	goneID    = "283bb9deef02e6843abfb538efa1eca70801bd8a701c3f98191e123496339247"
	gonePod   = "50c1f58b-e7f5-e47e-0f53-d64c094783c2"
	apiID     = "14c2529eb4498c5d1ffd6915d05bf58a91bdda796af59f41d480d11c099d0479"
	apiPod    = "402a1f4d-7fb8-4ad6-104a-868f0fa448a2"
	cfA, cfAP = "08e40d103205352cf218f5f360bb16a2b05c8a62f5436354bdbc1cf0be102214", "4efb2986-410c-1614-58e1-860c4fac3b53"
	cfB, cfBP = "217a22392e1d6281145770fcbced27317e5af8870284120934eb6c201ea1db2f", "80740374-3b98-001f-9171-9d3ced2f0ab5"
	cfC, cfCP = "664b707a17e968e8b7252f739968e437a06ad744c24fb28a9c42e3113fde19cb", "2fd1b071-eff4-8852-eec6-7003923b08b2"
	v1sd, v1P = "164ad18f89134c38df28ab9e37ab62a27f65063fa63058572808659241e9f0f5", "43bffd12-e8c3-e204-a8b1-2b361950fdcb"
	v1dock    = "44b317d826b2d53c344ee49e3fe4686613870c72d811dfd8ec1645d4579f6a47"
	v1k8s, kP = "86171f5af6fd96f17d847b442b052b300e312a5dccc137b5b18ae8116804c4a7", "dbb4e847-94cb-54b0-e19a-40503044b1f0"
	v1pause   = "733b3ddd29a5099f234b02bf6afa9911a06d45955f8e8cc20376198a83743bc4"
	hyID, hyP = "02b9fee20b66a5d1fe467835495b12d65754db28c5433f04305211b37e567c23", "035ed231-1b96-d2a6-5ec6-a6fe71046c14"
	nsID, nsP = "aeb20f55797576dc23cbb64f4f6103c569f61cca740e1d1c29ff3a16040efb47", "09d926ad-63b4-6c81-0b33-666e41bf1c50"
	podmanRec = "9d4a43cd41956d3317becb914ead050da832c3ed1b44b2ee8713fc1c35fba607"
)

// want is a workload in short: the fields a case checks; "" is null.
// idDir is the fixture directory whose inode the cgroup id must be
// ("" : null).
type want struct {
	path, hierarchy, idDir                    string
	container, runtime, unit, pod, qos        string
	namespace, podName, containerName, source string
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func check(t *testing.T, root string, pid int, w evidence.Workload, exp want) {
	t.Helper()
	got := []string{str(w.CgroupPath), str(w.CgroupHierarchy), str(w.ContainerID), str(w.Runtime), str(w.Unit), str(w.PodUID),
		str(w.QOSClass), str(w.Namespace), str(w.Pod), str(w.Container), str(w.NamesFrom)}
	exps := []string{exp.path, exp.hierarchy, exp.container, exp.runtime, exp.unit, exp.pod, exp.qos, exp.namespace, exp.podName,
		exp.containerName, exp.source}
	names := []string{"cgroup_path", "cgroup_hierarchy", "container_id", "runtime", "systemd_unit", "pod_uid", "qos_class",
		"namespace", "pod", "container", "names_from"}
	for i := range got {
		if got[i] != exps[i] {
			t.Errorf("%s pid %d: %s = %q, want %q", filepath.Base(root), pid, names[i], got[i], exps[i])
		}
	}
	switch {
	case exp.idDir == "" && w.CgroupID != nil:
		t.Errorf("%s pid %d: cgroup id %d, want null", filepath.Base(root), pid, *w.CgroupID)
	case exp.idDir != "" && w.CgroupID == nil:
		t.Errorf("%s pid %d: cgroup id null, want the inode of %s", filepath.Base(root), pid, exp.idDir)
	case exp.idDir != "" && *w.CgroupID != inode(t, filepath.Join(root, exp.idDir)):
		t.Errorf("%s pid %d: cgroup id %d is not the inode of %s", filepath.Base(root), pid, *w.CgroupID, exp.idDir)
	}
}

func sd(uid string) string { return strings.ReplaceAll(uid, "-", "_") }

func TestAttributeLayouts(t *testing.T) {
	webPath := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(webPod) + ".slice/cri-containerd-" + webID + ".scope"
	cases := map[string]map[int]want{
		"v2-systemd": {
			101: {path: webPath, hierarchy: "v2", idDir: "sys/fs/cgroup" + webPath, container: webID, runtime: "containerd", pod: webPod, qos: "Burstable",
				namespace: "shop", podName: "web-7d9f8b6c5-x2x7q", containerName: "nginx", source: "containerd state"},
			// A second process of the same container: the same answer.
			113: {path: webPath, hierarchy: "v2", idDir: "sys/fs/cgroup" + webPath, container: webID, runtime: "containerd", pod: webPod, qos: "Burstable",
				namespace: "shop", podName: "web-7d9f8b6c5-x2x7q", containerName: "nginx", source: "containerd state"},
			// The sandbox (pause) container: the pod's names, no container name.
			102: {path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(webPod) + ".slice/cri-containerd-" + webPause + ".scope", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(webPod) + ".slice/cri-containerd-" + webPause + ".scope",
				container: webPause, runtime: "containerd", pod: webPod, qos: "Burstable", namespace: "shop", podName: "web-7d9f8b6c5-x2x7q", source: "containerd state"},
			103: {path: "/kubepods.slice/kubepods-pod" + sd(dbPod) + ".slice/crio-" + dbID + ".scope", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/kubepods.slice/kubepods-pod" + sd(dbPod) + ".slice/crio-" + dbID + ".scope",
				container: dbID, runtime: "cri-o", pod: dbPod, qos: "Guaranteed", namespace: "shop", podName: "db-0", containerName: "postgres", source: "cri-o state"},
			// conmon belongs to the pod, not to the container it watches.
			104: {path: "/kubepods.slice/kubepods-pod" + sd(dbPod) + ".slice/crio-conmon-" + dbID + ".scope", hierarchy: "v2",
				idDir:   "sys/fs/cgroup/kubepods.slice/kubepods-pod" + sd(dbPod) + ".slice/crio-conmon-" + dbID + ".scope",
				runtime: "cri-o", unit: "crio-conmon-" + dbID + ".scope", pod: dbPod, qos: "Guaranteed"},
			105: {path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(jobPod) + ".slice/docker-" + jobID + ".scope", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(jobPod) + ".slice/docker-" + jobID + ".scope",
				container: jobID, runtime: "docker", pod: jobPod, qos: "BestEffort", namespace: "batch", podName: "report-28391-abcde", containerName: "report", source: "docker state"},
			106: {path: "/system.slice/docker-" + redisID + ".scope", hierarchy: "v2", idDir: "sys/fs/cgroup/system.slice/docker-" + redisID + ".scope",
				container: redisID, runtime: "docker", containerName: "cache", source: "docker state"},
			107: {path: "/machine.slice/libpod-" + podmanWeb + ".scope", hierarchy: "v2", idDir: "sys/fs/cgroup/machine.slice/libpod-" + podmanWeb + ".scope",
				container: podmanWeb, runtime: "podman", containerName: "webapp", source: "podman state"},
			// Rootless Podman's state is in the user's home: id and
			// runtime from the path, no name.
			108: {path: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + rootless + ".scope/container", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + rootless + ".scope/container",
				container: rootless, runtime: "podman"},
			109: {path: "/system.slice/nginx.service", hierarchy: "v2", idDir: "sys/fs/cgroup/system.slice/nginx.service", unit: "nginx.service"},
			110: {path: "/system.slice/docker-7232fa5b7fe3f027d56d3feba41858ad7e5841fa3432d4b5b9f98c0186b6abbb.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + sd(corednsUI) + ".slice/cri-containerd-" + corednsID + ".scope",
				hierarchy: "v2", idDir: "sys/fs/cgroup/system.slice/docker-7232fa5b7fe3f027d56d3feba41858ad7e5841fa3432d4b5b9f98c0186b6abbb.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + sd(corednsUI) + ".slice/cri-containerd-" + corednsID + ".scope",
				container: corednsID, runtime: "containerd", pod: corednsUI, qos: "Burstable"},
			// Removed: no directory, so no id; the path still says what
			// it was.
			111: {path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(gonePod) + ".slice/cri-containerd-" + goneID + ".scope", hierarchy: "v2",
				container: goneID, runtime: "containerd", pod: gonePod, qos: "BestEffort"},
			112: {path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(apiPod) + ".slice/cri-containerd-" + apiID + ".scope", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(apiPod) + ".slice/cri-containerd-" + apiID + ".scope",
				container: apiID, runtime: "containerd", pod: apiPod, qos: "Burstable"},
			1: {path: "/init.scope", hierarchy: "v2", idDir: "sys/fs/cgroup/init.scope", unit: "init.scope"},
		},
		"v2-cgroupfs": {
			// The cgroupfs driver names a containerd container by its
			// bare id: the runtime comes from its state.
			201: {path: "/kubepods/burstable/pod" + cfAP + "/" + cfA, hierarchy: "v2", idDir: "sys/fs/cgroup/kubepods/burstable/pod" + cfAP + "/" + cfA,
				container: cfA, runtime: "containerd", pod: cfAP, qos: "Burstable", namespace: "web", podName: "frontend-0", containerName: "envoy", source: "containerd state"},
			// No state: the runtime stays unknown.
			202: {path: "/kubepods/pod" + cfBP + "/" + cfB, hierarchy: "v2", idDir: "sys/fs/cgroup/kubepods/pod" + cfBP + "/" + cfB,
				container: cfB, pod: cfBP, qos: "Guaranteed"},
			203: {path: "/kubepods/besteffort/pod" + cfCP + "/crio-" + cfC, hierarchy: "v2", idDir: "sys/fs/cgroup/kubepods/besteffort/pod" + cfCP + "/crio-" + cfC,
				container: cfC, runtime: "cri-o", pod: cfCP, qos: "BestEffort", namespace: "jobs", podName: "batch-1", containerName: "worker", source: "cri-o state"},
		},
		"v1-systemd": {
			// v1 only: no cgroup id (bpf_get_current_cgroup_id has no v2
			// cgroup to return).
			301: {path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(v1P) + ".slice/cri-containerd-" + v1sd + ".scope", hierarchy: "v1:pids",
				container: v1sd, runtime: "containerd", pod: v1P, qos: "Burstable", namespace: "prod", podName: "search-2", containerName: "elasticsearch", source: "containerd state"},
			302: {path: "/system.slice/sshd.service", hierarchy: "v1:pids", unit: "sshd.service"},
		},
		"v1-cgroupfs": {
			401: {path: "/docker/" + v1dock, hierarchy: "v1:pids", container: v1dock, runtime: "docker", containerName: "memcached", source: "docker state"},
			402: {path: "/kubepods/burstable/pod" + kP + "/" + v1k8s, hierarchy: "v1:pids", container: v1k8s, runtime: "docker", pod: kP, qos: "Burstable",
				namespace: "shop", podName: "checkout-5f7d", containerName: "app", source: "docker state"},
			// dockershim's sandbox is named "POD": not a container name.
			403: {path: "/kubepods/burstable/pod" + kP + "/" + v1pause, hierarchy: "v1:pids", container: v1pause, runtime: "docker", pod: kP, qos: "Burstable",
				namespace: "shop", podName: "checkout-5f7d", source: "docker state"},
		},
		"hybrid-systemd": {
			501: {path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(hyP) + ".slice/docker-" + hyID + ".scope", hierarchy: "v2",
				idDir:     "sys/fs/cgroup/unified/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + sd(hyP) + ".slice/docker-" + hyID + ".scope",
				container: hyID, runtime: "docker", pod: hyP, qos: "Burstable"},
		},
		"podman-hybrid": {
			354: {path: "/libpod_parent/libpod-" + podmanRec, hierarchy: "v2", idDir: "sys/fs/cgroup/unified/libpod_parent/libpod-" + podmanRec,
				container: podmanRec, runtime: "podman", containerName: "mysrv", source: "podman state"},
			// conmon under Podman's cgroupfs manager: in
			// /libpod_parent/conmon of the v1 controllers, at the v2 root.
			344: {path: "/", hierarchy: "v2", idDir: "sys/fs/cgroup/unified"},
		},
		"cgroupns": {
			// Another pod, seen from perfscope's own cgroup namespace:
			// the id is found on the host's cgroup2 mounted in.
			601: {path: "/../../../kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(nsP) + ".slice/cri-containerd-" + nsID + ".scope", hierarchy: "v2",
				idDir:     "host/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + sd(nsP) + ".slice/cri-containerd-" + nsID + ".scope",
				container: nsID, runtime: "containerd", pod: nsP, qos: "BestEffort"},
			// perfscope itself, at its namespace's root.
			602: {path: "/", hierarchy: "v2", idDir: "sys/fs/cgroup"},
		},
	}
	for dir, pids := range cases {
		root := filepath.Join("testdata", dir)
		x := NewIndex(FS{Root: root}, nil)
		for pid, exp := range pids {
			w, err := x.Attribute(pid)
			if err != nil {
				t.Errorf("%s pid %d: %v", dir, pid, err)
				continue
			}
			check(t, root, pid, w, exp)
		}
		if p := x.Problems(); len(p) > 0 {
			t.Errorf("%s: problems %v", dir, p)
		}
	}
}

func TestAttributeNoProcess(t *testing.T) {
	_, err := NewIndex(FS{Root: "testdata/v2-systemd"}, nil).Attribute(99999)
	if !errors.Is(err, ErrNoProcess) {
		t.Fatalf("err = %v, want ErrNoProcess", err)
	}
}

func TestParseProcCgroup(t *testing.T) {
	m, err := parseProcCgroup(strings.NewReader("12:pids:/a\n11:cpu,cpuacct:/b:c\n1:name=systemd:/d\n0::/e (deleted)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if str(m.V2) != "/e" || len(m.V1) != 3 || m.V1[1].Path != "/b:c" || m.V1[1].Hierarchy() != "v1:cpu,cpuacct" || m.V1[2].Hierarchy() != "v1:name=systemd" {
		t.Fatalf("%+v", m)
	}
	for _, bad := range []string{"garbage\n", "x:pids:/a\n", "3::/a\n", "0::relative\n", "1:cpu\n"} {
		if _, err := parseProcCgroup(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseLayout(t *testing.T) {
	for path, exp := range map[string]Layout{
		// Pod uids are checked for shape: a slice that merely mentions
		// kubepods is not a pod.
		"/kubepods.slice/kubepods-burstable.slice":              {},
		"/kubepods.slice/kubepods-burstable.slice/x-pod1.slice": {},
		// A Guaranteed pod's own cgroup (v1 hosts place nothing there,
		// but a filter may name it).
		"/kubepods/pod" + cfBP: {PodUID: cfBP, QOSClass: Guaranteed},
		// "pod<uid>" outside the kubelet's tree is not a pod.
		"/other/pod" + cfBP + "/" + cfB: {},
		// docker-compose-like names are not containers.
		"/system.slice/docker-compose@web.service": {Unit: "docker-compose@web.service"},
		"/system.slice/docker.service":             {Unit: "docker.service"},
		// CRI-O under cgroupfs drops .scope.
		"/kubepods/burstable/pod" + cfCP + "/crio-" + cfC: {ContainerID: cfC, Runtime: CRIO, PodUID: cfCP, QOSClass: Burstable},
		"/libpod_parent/libpod-" + podmanRec:              {ContainerID: podmanRec, Runtime: Podman},
		"/":                                               {},
		"/user.slice/user-1000.slice/session-3.scope": {Unit: "session-3.scope"},
	} {
		if got := ParseLayout(path); got != exp {
			t.Errorf("%s: %+v, want %+v", path, got, exp)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
