package evidence

// Workload is what a process belongs to beyond its pid: its cgroup, the
// container that cgroup is, and the Kubernetes pod around it. Every field
// is null when it could not be learned — from the process's cgroup path,
// the container runtime's state on the node or the Kubernetes API — and
// never guessed: a host process has a cgroup and maybe a systemd unit but
// no container; a container seen only by its cgroup path has an id and a
// runtime but no name.
type Workload struct {
	// CgroupPath is the process's cgroup as /proc/PID/cgroup names it,
	// relative to the reader's cgroup namespace: the cgroup v2 path, or on
	// a host whose containers live in v1 hierarchies only, the v1 path
	// that named the container (CgroupHierarchy says which).
	CgroupPath *string `json:"cgroup_path"`
	// CgroupHierarchy is "v2", or "v1:" and the controllers of the v1
	// hierarchy CgroupPath comes from (e.g. "v1:memory").
	CgroupHierarchy *string `json:"cgroup_hierarchy"`
	// CgroupID is the cgroup v2 id (the inode number of the cgroup's
	// directory, what bpf_get_current_cgroup_id returns for the process);
	// null on a v1-only host or when the cgroup v2 file system is not
	// mounted where perfscope can see it.
	CgroupID *uint64 `json:"cgroup_id"`
	// ContainerID is the runtime's full container id (64 hex digits).
	ContainerID *string `json:"container_id"`
	// Runtime is "containerd", "cri-o", "docker" or "podman".
	Runtime *string `json:"runtime"`
	// Unit is the systemd unit (a .service or .scope) of a process that
	// is not in a container: "nginx.service".
	Unit *string `json:"systemd_unit"`
	// PodUID is the Kubernetes pod's uid, from the kubelet's cgroup name.
	PodUID *string `json:"pod_uid"`
	// QOSClass is the pod's QoS class from the kubelet's cgroup tree:
	// "Guaranteed", "Burstable" or "BestEffort".
	QOSClass *string `json:"qos_class"`
	// Namespace, Pod and Container are names. Container is the
	// Kubernetes container name in a pod, or the runtime's name of a
	// plain Docker or Podman container.
	Namespace *string `json:"namespace"`
	Pod       *string `json:"pod"`
	Container *string `json:"container"`
	// NamesFrom says where the names came from: "containerd state",
	// "cri-o state", "docker state", "podman state" or "kubernetes api".
	NamesFrom *string `json:"names_from"`
}

// InContainer is true when the process runs in a container perfscope
// recognised.
func (w Workload) InContainer() bool { return w.ContainerID != nil }

// InPod is true when the process runs in a Kubernetes pod.
func (w Workload) InPod() bool { return w.PodUID != nil }
