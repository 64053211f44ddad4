package cgroup

import (
	"regexp"
	"strings"
)

// Runtimes, as evidence.Workload names them.
const (
	Containerd = "containerd"
	CRIO       = "cri-o"
	Docker     = "docker"
	Podman     = "podman"
)

// QoS classes, as Kubernetes names them.
const (
	Guaranteed = "Guaranteed"
	Burstable  = "Burstable"
	BestEffort = "BestEffort"
)

// Layout is what a cgroup path says by its names alone.
type Layout struct {
	// ContainerID is the runtime's container id; Runtime is known when
	// the cgroup's name says it (cri-containerd-, crio-, docker-,
	// libpod-), empty when only the runtime's state can tell (the
	// kubelet's cgroupfs driver names a containerd container by its bare
	// id).
	ContainerID, Runtime string
	// Monitor is set for a runtime's per-container monitor (CRI-O's and
	// Podman's conmon, in crio-conmon-ID.scope / libpod-conmon-ID.scope):
	// it belongs to the container's pod but is not the container.
	Monitor bool
	// Unit is the innermost systemd unit (.service or .scope) of a cgroup
	// that is no container.
	Unit string
	// PodUID and QOSClass come from the kubelet's pod cgroup.
	PodUID, QOSClass string
}

var (
	// The kubelet's systemd driver: kubepods.slice/kubepods-burstable.slice/
	// kubepods-burstable-pod<uid with _ for ->.slice; a Guaranteed pod sits
	// right under kubepods.slice as kubepods-pod<uid>.slice. A kubelet
	// with --cgroup-root (kind: /kubelet) prefixes every slice
	// ("kubelet-kubepods-burstable-pod….slice").
	systemdPod = regexp.MustCompile(`^(?:[a-z0-9_.]+-)?kubepods(?:-(burstable|besteffort))?-pod([0-9a-f_]{32,36})\.slice$`)
	// The cgroupfs driver: /kubepods/burstable/pod<uid>/…, Guaranteed
	// pods right under /kubepods.
	cgroupfsPod = regexp.MustCompile(`^pod([0-9a-f-]{32,36})$`)
	// Container cgroups: the runtime's prefix, 64 hex digits, ".scope"
	// under systemd. CRI-O under the cgroupfs driver drops the ".scope".
	containerName = regexp.MustCompile(`^(cri-containerd|crio|crio-conmon|docker|libpod|libpod-conmon)-([0-9a-f]{64})(\.scope)?$`)
	bareID        = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

var prefixRuntime = map[string]string{
	"cri-containerd": Containerd, "crio": CRIO, "crio-conmon": CRIO,
	"docker": Docker, "libpod": Podman, "libpod-conmon": Podman,
}

// ParseLayout reads what the cgroup path p names: the innermost container
// (a kind node's containers are inside the node's own container), the
// pod around it and, for a process in no container, its systemd unit.
func ParseLayout(p string) Layout {
	c := components(p)
	var l Layout
	container := -1
	for i := len(c) - 1; i >= 0 && container < 0; i-- {
		if m := containerName.FindStringSubmatch(c[i]); m != nil {
			if strings.HasSuffix(m[1], "-conmon") {
				l.Monitor, l.Unit = true, c[i]
			} else {
				l.ContainerID = m[2]
			}
			l.Runtime = prefixRuntime[m[1]]
			container = i
			continue
		}
		if bareID.MatchString(c[i]) && i > 0 {
			switch parent := c[i-1]; {
			case parent == "docker":
				l.ContainerID, l.Runtime, container = c[i], Docker, i
			case isPod(c[:i]):
				l.ContainerID, container = c[i], i
			}
		}
	}
	// The pod is the one around the container (or, for a process in the
	// pod's cgroup itself, the innermost).
	end := len(c)
	if container >= 0 {
		end = container
	}
	for i := end - 1; i >= 0; i-- {
		if m := systemdPod.FindStringSubmatch(c[i]); m != nil {
			l.PodUID, l.QOSClass = strings.ReplaceAll(m[2], "_", "-"), qosOf(m[1])
			break
		}
		if m := cgroupfsPod.FindStringSubmatch(c[i]); m != nil && i > 0 {
			if qos, ok := cgroupfsQOS(c[:i]); ok {
				l.PodUID, l.QOSClass = m[1], qos
				break
			}
		}
	}
	if container < 0 && l.PodUID == "" {
		for i := len(c) - 1; i >= 0; i-- {
			if strings.HasSuffix(c[i], ".service") || strings.HasSuffix(c[i], ".scope") {
				l.Unit = c[i]
				break
			}
		}
	}
	return l
}

// isPod is true when the last of c is a pod's cgroup in the kubelet's
// tree.
func isPod(c []string) bool {
	n := len(c)
	if n == 0 {
		return false
	}
	if systemdPod.MatchString(c[n-1]) {
		return true
	}
	_, ok := cgroupfsQOS(c[:n-1])
	return ok && cgroupfsPod.MatchString(c[n-1])
}

// cgroupfsQOS is the QoS class of a pod whose cgroup's parents are
// parents: …/kubepods/burstable, …/kubepods/besteffort, or …/kubepods
// (Guaranteed).
func cgroupfsQOS(parents []string) (string, bool) {
	n := len(parents)
	switch {
	case n >= 1 && parents[n-1] == "kubepods":
		return Guaranteed, true
	case n >= 2 && parents[n-2] == "kubepods" && parents[n-1] == "burstable":
		return Burstable, true
	case n >= 2 && parents[n-2] == "kubepods" && parents[n-1] == "besteffort":
		return BestEffort, true
	}
	return "", false
}

func qosOf(tier string) string {
	switch tier {
	case "burstable":
		return Burstable
	case "besteffort":
		return BestEffort
	}
	return Guaranteed
}

// Recognised is true when the path names a container, a pod or a unit.
func (l Layout) Recognised() bool {
	return l.ContainerID != "" || l.PodUID != "" || l.Unit != "" || l.Monitor
}

// inContainerOrPod is true when the path names a container or a pod.
func (l Layout) inContainerOrPod() bool {
	return l.ContainerID != "" || l.PodUID != "" || l.Monitor
}
