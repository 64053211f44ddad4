package privilege

import (
	"sort"
	"strings"
)

// The Kubernetes types below mirror the fields of k8s.io/api/core/v1 that
// doctor prints, with the same JSON and YAML names; deploy/kubernetes'
// test decodes doctor's output strictly into the real types, so a field
// that drifted would fail there. perfscope itself does not import
// k8s.io/api: it would triple the binary's dependencies for a printer.

// PodSpec is the part of a pod spec a recipe needs.
type PodSpec struct {
	HostPID     bool        `json:"hostPID,omitempty" yaml:"hostPID,omitempty"`
	HostNetwork bool        `json:"hostNetwork,omitempty" yaml:"hostNetwork,omitempty"`
	Containers  []Container `json:"containers" yaml:"containers"`
	Volumes     []Volume    `json:"volumes,omitempty" yaml:"volumes,omitempty"`
}

// Container is perfscope's container in the pod.
type Container struct {
	Name            string          `json:"name" yaml:"name"`
	SecurityContext SecurityContext `json:"securityContext" yaml:"securityContext"`
	VolumeMounts    []VolumeMount   `json:"volumeMounts,omitempty" yaml:"volumeMounts,omitempty"`
}

// SecurityContext is corev1.SecurityContext's subset.
type SecurityContext struct {
	Privileged               *bool           `json:"privileged,omitempty" yaml:"privileged,omitempty"`
	RunAsUser                *int64          `json:"runAsUser,omitempty" yaml:"runAsUser,omitempty"`
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty" yaml:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem   *bool           `json:"readOnlyRootFilesystem,omitempty" yaml:"readOnlyRootFilesystem,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty" yaml:"allowPrivilegeEscalation,omitempty"`
	Capabilities             *Capabilities   `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
	SeccompProfile           *SeccompProfile `json:"seccompProfile,omitempty" yaml:"seccompProfile,omitempty"`
}

// Capabilities are named without CAP_, as Kubernetes writes them.
type Capabilities struct {
	Add  []string `json:"add,omitempty" yaml:"add,omitempty"`
	Drop []string `json:"drop,omitempty" yaml:"drop,omitempty"`
}

// SeccompProfile is RuntimeDefault or Unconfined.
type SeccompProfile struct {
	Type string `json:"type" yaml:"type"`
}

// VolumeMount mounts a volume into the container.
type VolumeMount struct {
	Name      string `json:"name" yaml:"name"`
	MountPath string `json:"mountPath" yaml:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty" yaml:"readOnly,omitempty"`
}

// Volume is a hostPath or an emptyDir.
type Volume struct {
	Name     string          `json:"name" yaml:"name"`
	HostPath *HostPathSource `json:"hostPath,omitempty" yaml:"hostPath,omitempty"`
	EmptyDir *EmptyDirSource `json:"emptyDir,omitempty" yaml:"emptyDir,omitempty"`
}

// HostPathSource is a directory of the node.
type HostPathSource struct {
	Path string `json:"path" yaml:"path"`
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
}

// EmptyDirSource is scratch space that lives as long as the pod.
type EmptyDirSource struct{}

// volumeFor names each mount need's volume and its source on the node:
// the kernel's BTF and tracefs are the node's own; results are scratch
// (a Job prints its report to stdout); GC logs are wherever the node
// keeps them (/var/log by default: adjust).
var volumeFor = map[string]Volume{
	"/sys/kernel/btf":     {Name: "btf", HostPath: &HostPathSource{Path: "/sys/kernel/btf", Type: "Directory"}},
	"/sys/kernel/tracing": {Name: "tracefs", HostPath: &HostPathSource{Path: "/sys/kernel/tracing", Type: "Directory"}},
	"/results":            {Name: "results", EmptyDir: &EmptyDirSource{}},
	"/logs":               {Name: "logs", HostPath: &HostPathSource{Path: "/var/log", Type: "Directory"}},
	"/sys/fs/cgroup":      {Name: "cgroup", HostPath: &HostPathSource{Path: "/sys/fs/cgroup", Type: "Directory"}},
}

// ContainerName is perfscope's container's name in every manifest.
const ContainerName = "perfscope"

// Pod is the least a pod needs to meet needs: every capability dropped
// but those named, the root file system read-only, no privilege
// escalation, the runtime's default seccomp profile (which allows bpf()
// and perf_event_open with CAP_BPF and CAP_PERFMON since Docker 23 and
// containerd 1.7), the host namespaces and mounts asked for. Needs that
// include a Writable kernel file system (--apply) make the container
// privileged: no capability makes /proc/sys writable in a container.
func Pod(needs []Need) PodSpec {
	yes, no := true, false
	root := int64(0)
	sc := SecurityContext{RunAsUser: &root, ReadOnlyRootFilesystem: &yes}
	privileged := false
	for _, n := range needs {
		privileged = privileged || n.Kind == Writable
	}
	if privileged {
		sc.Privileged = &yes
	} else {
		sc.AllowPrivilegeEscalation = &no
		caps := &Capabilities{Drop: []string{"ALL"}}
		for _, c := range CapabilityNames(needs) {
			caps.Add = append(caps.Add, strings.TrimPrefix(c, "CAP_"))
		}
		sc.Capabilities = caps
		sc.SeccompProfile = &SeccompProfile{Type: "RuntimeDefault"}
	}
	pod := PodSpec{Containers: []Container{{Name: ContainerName, SecurityContext: sc}}}
	var mounts []Need
	for _, n := range needs {
		switch {
		case n.Kind == Namespace && n.Name == HostPID:
			pod.HostPID = true
		case n.Kind == Namespace && (n.Name == HostNetwork || n.Name == HostUTS):
			// A hostNetwork pod has the node's host name too.
			pod.HostNetwork = true
		case n.Kind == Mount:
			mounts = append(mounts, n)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return mounts[i].Name < mounts[j].Name })
	for _, m := range mounts {
		v, ok := volumeFor[m.Name]
		if !ok {
			continue
		}
		pod.Volumes = append(pod.Volumes, v)
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts,
			VolumeMount{Name: v.Name, MountPath: m.Name, ReadOnly: m.ReadOnly})
	}
	return pod
}

// RunLine is the docker/podman run line for needs (without the image and
// the command): the same grants as Pod.
func RunLine(needs []Need) string {
	args := []string{"--rm"}
	privileged := false
	for _, n := range needs {
		privileged = privileged || n.Kind == Writable
	}
	if privileged {
		args = append(args, "--privileged")
	} else {
		args = append(args, "--cap-drop ALL")
		for _, c := range CapabilityNames(needs) {
			args = append(args, "--cap-add "+strings.TrimPrefix(c, "CAP_"))
		}
		args = append(args, "--read-only")
	}
	for _, n := range needs {
		switch {
		case n.Kind == Namespace && n.Name == HostPID:
			args = append(args, "--pid=host")
		case n.Kind == Namespace && n.Name == HostNetwork:
			args = append(args, "--net=host")
		case n.Kind == Namespace && n.Name == HostUTS:
			args = append(args, "--uts=host")
		}
	}
	mounted := map[string]bool{}
	for _, n := range needs {
		if n.Kind != Mount || mounted[n.Name] {
			continue // a recipe's output directory and --apply's revert file share /results
		}
		mounted[n.Name] = true
		src := n.Name
		if v, ok := volumeFor[n.Name]; ok && v.HostPath != nil {
			src = v.HostPath.Path
		} else if n.Name == "/results" {
			src = "$PWD/results"
		}
		ro := ""
		if n.ReadOnly {
			ro = ":ro"
		}
		args = append(args, "-v "+src+":"+n.Name+ro)
	}
	return strings.Join(args, " ")
}
