package cgroup

import (
	"strings"
	"testing"
)

// /proc/PID/cgroup of any shape parses or fails without panicking, and
// every path it yields reads as a layout whose ids have their shapes.
func FuzzParseProcCgroup(f *testing.F) {
	for _, seed := range []string{
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podafd61604_8ab7_750a_3199_1673716530ff.slice/cri-containerd-" + webID + ".scope\n",
		"12:pids:/kubepods/burstable/pod" + kP + "/" + v1k8s + "\n1:name=systemd:/docker/" + v1dock + "\n",
		"0::/../../../kubepods-besteffort.slice/x (deleted)\n",
		"0::/libpod_parent/libpod-" + podmanRec + "\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseProcCgroup(strings.NewReader(s))
		if err != nil {
			return
		}
		paths := []string{}
		if m.V2 != nil {
			paths = append(paths, *m.V2)
		}
		for _, h := range m.V1 {
			paths = append(paths, h.Path)
		}
		for _, p := range paths {
			l := ParseLayout(p)
			if l.ContainerID != "" && !bareID.MatchString(l.ContainerID) {
				t.Errorf("%q: container id %q", p, l.ContainerID)
			}
			if l.PodUID != "" && (strings.Contains(l.PodUID, "_") || len(l.PodUID) < 32) {
				t.Errorf("%q: pod uid %q", p, l.PodUID)
			}
		}
	})
}
