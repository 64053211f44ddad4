package cpuset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// SMT is the state of simultaneous multithreading from
// /sys/devices/system/cpu/smt. Makita's talk gains throughput by turning it on,
// so "available but off" must be told apart from "not supported".
type SMT struct {
	// Known is false when the kernel has no smt directory (older kernels,
	// some architectures); the other fields are then meaningless.
	Known bool `json:"known"`
	// Active is smt/active: sibling threads are online.
	Active bool `json:"active"`
	// Control is smt/control: "on", "off", "forceoff", "notsupported" or
	// "notimplemented".
	Control string `json:"control"`
}

// Available reports whether the hardware has SMT that could be turned on
// (control "on" or "off"); "forceoff" needs a reboot without nosmt.
func (s SMT) Available() bool {
	return s.Known && (s.Control == "on" || s.Control == "off")
}

// NUMANode is one node of /sys/devices/system/node.
type NUMANode struct {
	ID   int `json:"id"`
	CPUs Set `json:"cpus"`
}

// Topology is what CPU recommendations need to know about the machine.
type Topology struct {
	// Online is /sys/devices/system/cpu/online.
	Online Set `json:"online"`
	// Possible is /sys/devices/system/cpu/possible; its size is the kernel's
	// nr_cpu_ids, which sets the width of the cpumasks it prints.
	Possible Set `json:"possible"`
	// Siblings maps each online CPU to its thread_siblings_list (itself
	// included). Absent entries: the CPU's topology directory is missing.
	Siblings map[int]Set `json:"siblings"`
	SMT      SMT         `json:"smt"`
	// Nodes is empty when the kernel has no NUMA support (no node
	// directory); a single-node machine lists node 0.
	Nodes []NUMANode `json:"nodes"`
}

// NrCPUIDs is the number of bits in the kernel's cpumasks.
func (t Topology) NrCPUIDs() int {
	if n := t.Possible.Max() + 1; n > 0 {
		return n
	}
	return t.Online.Max() + 1
}

// NodeOf returns the NUMA node of cpu, or -1 when unknown.
func (t Topology) NodeOf(cpu int) int {
	for _, n := range t.Nodes {
		if n.CPUs.Contains(cpu) {
			return n.ID
		}
	}
	return -1
}

// NodeCPUs returns the CPUs of node id (empty when the node is unknown).
func (t Topology) NodeCPUs(id int) Set {
	for _, n := range t.Nodes {
		if n.ID == id {
			return n.CPUs
		}
	}
	return Set{}
}

// FS reads topology below a root ("/" live, a fixture in tests).
type FS struct{ procfs.FS }

// NewFS reads below root.
func NewFS(root string) FS { return FS{procfs.FS{Root: root}} }

const cpuDir = "/sys/devices/system/cpu"

// Topology reads the CPU topology. Only the online list is required; every
// other source is optional and reported absent rather than guessed.
func (fs FS) Topology() (Topology, error) {
	var t Topology
	var err error
	if t.Online, err = fs.readList(cpuDir + "/online"); err != nil {
		return t, err
	}
	if t.Possible, err = fs.readList(cpuDir + "/possible"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return t, err
	}
	t.Siblings = map[int]Set{}
	for _, cpu := range t.Online.CPUs() {
		sib, err := fs.readList(fmt.Sprintf("%s/cpu%d/topology/thread_siblings_list", cpuDir, cpu))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return t, err
		}
		t.Siblings[cpu] = sib
	}
	if t.SMT, err = fs.smt(); err != nil {
		return t, err
	}
	if t.Nodes, err = fs.nodes(); err != nil {
		return t, err
	}
	return t, nil
}

// readList reads a cpulist file.
func (fs FS) readList(path string) (Set, error) {
	text, err := fs.ReadString(path)
	if err != nil {
		return Set{}, err
	}
	s, err := ParseList(text)
	if err != nil {
		return Set{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ReadMask reads a cpumask file (rps_cpus, smp_affinity, ...).
func (fs FS) ReadMask(path string) (Set, error) {
	text, err := fs.ReadString(path)
	if err != nil {
		return Set{}, err
	}
	s, err := ParseMask(text)
	if err != nil {
		return Set{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ReadList reads a cpulist file (cpulist, effective_affinity_list, ...).
func (fs FS) ReadList(path string) (Set, error) { return fs.readList(path) }

func (fs FS) smt() (SMT, error) {
	control, err := fs.ReadString(cpuDir + "/smt/control")
	if errors.Is(err, os.ErrNotExist) {
		return SMT{}, nil
	}
	if err != nil {
		return SMT{}, err
	}
	s := SMT{Known: true, Control: strings.TrimSpace(control)}
	active, err := fs.ReadInt(cpuDir + "/smt/active")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return SMT{}, err
	}
	s.Active = active == 1
	return s, nil
}

func (fs FS) nodes() ([]NUMANode, error) {
	dirs, err := filepath.Glob(fs.Path("/sys/devices/system/node/node[0-9]*"))
	if err != nil {
		return nil, err
	}
	var nodes []NUMANode
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		cpus, err := fs.readList(fmt.Sprintf("/sys/devices/system/node/node%d/cpulist", id))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, NUMANode{ID: id, CPUs: cpus})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}
