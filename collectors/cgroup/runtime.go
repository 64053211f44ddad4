package cgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// StateDirs says where each container runtime keeps the state perfscope
// reads names from (all below FS.Root).
type StateDirs struct {
	// ContainerdTasks hold containerd's running tasks,
	// NAMESPACE/ID/config.json (the OCI bundle's spec, whose annotations
	// the CRI plugin fills for Kubernetes containers).
	ContainerdTasks []string
	// ContainersStorage are containers/storage roots (CRI-O's and
	// Podman's): overlay-containers/ID/userdata/config.json and
	// overlay-containers/containers.json (the containers' names).
	ContainersStorage []string
	// Docker are Docker data roots: containers/ID/config.v2.json.
	Docker []string
}

// DefaultStateDirs are the runtimes' default locations (k3s keeps its
// containerd's under /run/k3s).
func DefaultStateDirs() StateDirs {
	return StateDirs{
		ContainerdTasks:   []string{"/run/containerd/io.containerd.runtime.v2.task", "/run/k3s/containerd/io.containerd.runtime.v2.task"},
		ContainersStorage: []string{"/run/containers/storage", "/var/lib/containers/storage"},
		Docker:            []string{"/var/lib/docker"},
	}
}

// Names are what a runtime's state says about one container.
type Names struct {
	// Runtime is the runtime whose state named the container.
	Runtime string
	// Container is the Kubernetes container name, or a plain Docker or
	// Podman container's name; empty for a pod's sandbox (pause)
	// container, which has none.
	Container string
	// Namespace, Pod and PodUID are set for a container in a Kubernetes
	// pod.
	Namespace, Pod, PodUID string
	// Sandbox is set for a pod's sandbox container.
	Sandbox bool
}

// maxStateFile bounds what perfscope reads of one state file: an OCI
// spec is a few KiB, a node's containers.json a few MiB.
const maxStateFile = 32 << 20

// errNotFound: no state of this runtime names the container.
var errNotFound = errors.New("no runtime state")

// ContainerNames looks the container up in the state of runtime (or of
// every runtime when runtime is ""). ok is false when no state names it.
func (fs FS) ContainerNames(id, runtime string) (Names, bool, error) {
	dirs := fs.stateDirs()
	// CRI-O and Podman share containers/storage: one lookup serves both.
	lookups := []struct {
		runtimes []string
		look     func(StateDirs, string) (Names, error)
	}{
		{[]string{Containerd}, fs.containerdNames},
		{[]string{CRIO, Podman}, fs.containersStorageNames},
		{[]string{Docker}, fs.dockerNames},
	}
	var firstErr error
	for _, l := range lookups {
		if runtime != "" && !slices.Contains(l.runtimes, runtime) {
			continue
		}
		n, err := l.look(dirs, id)
		switch {
		case err == nil:
			return n, true, nil
		case errors.Is(err, errNotFound):
		case firstErr == nil:
			firstErr = err
		}
	}
	return Names{}, false, firstErr
}

// ociSpec is the part of an OCI runtime spec (config.json) perfscope
// reads.
type ociSpec struct {
	Annotations map[string]string `json:"annotations"`
}

// containerdNames reads NAMESPACE/ID/config.json under each task root:
// Kubernetes containers live in the k8s.io namespace, Docker's in moby.
func (fs FS) containerdNames(dirs StateDirs, id string) (Names, error) {
	for _, root := range dirs.ContainerdTasks {
		namespaces, err := os.ReadDir(fs.Path(root))
		if err != nil {
			continue
		}
		for _, ns := range namespaces {
			var spec ociSpec
			err := readJSON(fs.Path(filepath.Join(root, ns.Name(), id, "config.json")), &spec)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return Names{}, err
			}
			return containerdAnnotations(spec.Annotations), nil
		}
	}
	return Names{}, errNotFound
}

// containerdAnnotations reads the CRI plugin's annotations
// (io.kubernetes.cri.*); a container containerd runs for another client
// (Docker's moby namespace, ctr) has none of them and no name here.
func containerdAnnotations(a map[string]string) Names {
	return Names{Runtime: Containerd,
		Container: a["io.kubernetes.cri.container-name"],
		Namespace: a["io.kubernetes.cri.sandbox-namespace"],
		Pod:       a["io.kubernetes.cri.sandbox-name"],
		PodUID:    a["io.kubernetes.cri.sandbox-uid"],
		Sandbox:   a["io.kubernetes.cri.container-type"] == "sandbox"}
}

// containersStorageNames reads a CRI-O or Podman container's spec under
// overlay-containers/ID/userdata. Podman marks its containers with
// io.container.manager=libpod and keeps their names in containers.json;
// CRI-O annotates pod and container names (io.kubernetes.pod.name…).
func (fs FS) containersStorageNames(dirs StateDirs, id string) (Names, error) {
	for _, root := range dirs.ContainersStorage {
		var spec ociSpec
		err := readJSON(fs.Path(filepath.Join(root, "overlay-containers", id, "userdata", "config.json")), &spec)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Names{}, err
		}
		a := spec.Annotations
		if a["io.container.manager"] == "libpod" {
			n := Names{Runtime: Podman}
			// Podman keeps the spec in its graph root and the names
			// beside it; CRI-O's runroot has no containers.json.
			for _, r := range append([]string{root}, dirs.ContainersStorage...) {
				if name, err := fs.storageName(r, id); err == nil {
					n.Container = name
					break
				}
			}
			return n, nil
		}
		return Names{Runtime: CRIO,
			Container: a["io.kubernetes.container.name"],
			Namespace: a["io.kubernetes.pod.namespace"],
			Pod:       a["io.kubernetes.pod.name"],
			PodUID:    a["io.kubernetes.pod.uid"],
			Sandbox:   a["io.kubernetes.cri-o.ContainerType"] == "sandbox"}, nil
	}
	return Names{}, errNotFound
}

// storageName is a container's first name in containers/storage's
// overlay-containers/containers.json.
func (fs FS) storageName(root, id string) (string, error) {
	var list []struct {
		ID    string   `json:"id"`
		Names []string `json:"names"`
	}
	if err := readJSON(fs.Path(filepath.Join(root, "overlay-containers", "containers.json")), &list); err != nil {
		return "", err
	}
	for _, c := range list {
		if c.ID == id && len(c.Names) > 0 {
			return c.Names[0], nil
		}
	}
	return "", errNotFound
}

// dockerNames reads containers/ID/config.v2.json: the container's name
// ("/web") and, for a Kubernetes container run through dockershim or
// cri-dockerd, the io.kubernetes.* labels.
func (fs FS) dockerNames(dirs StateDirs, id string) (Names, error) {
	for _, root := range dirs.Docker {
		var c struct {
			Name   string `json:"Name"`
			Config struct {
				Labels map[string]string `json:"Labels"`
			} `json:"Config"`
		}
		err := readJSON(fs.Path(filepath.Join(root, "containers", id, "config.v2.json")), &c)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Names{}, err
		}
		l := c.Config.Labels
		if pod := l["io.kubernetes.pod.name"]; pod != "" {
			n := Names{Runtime: Docker, Pod: pod, Namespace: l["io.kubernetes.pod.namespace"], PodUID: l["io.kubernetes.pod.uid"],
				Container: l["io.kubernetes.container.name"], Sandbox: l["io.kubernetes.docker.type"] == "podsandbox"}
			if n.Sandbox {
				n.Container = "" // dockershim names the sandbox "POD"
			}
			return n, nil
		}
		return Names{Runtime: Docker, Container: strings.TrimPrefix(c.Name, "/")}, nil
	}
	return Names{}, errNotFound
}

// readJSON decodes a state file of at most maxStateFile bytes.
func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxStateFile {
		return fmt.Errorf("%s: larger than %d MiB", path, maxStateFile>>20)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
