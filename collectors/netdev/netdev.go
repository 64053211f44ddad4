// Package netdev reads what the kernel exposes about one network interface
// in /sys/class/net: whether it exists and is up, its driver, whether it is
// virtual, its NUMA node, and its RX/TX queues with their RPS and XPS
// settings — the per-queue configuration that Makita's talk tunes. It also finds
// an interface that lives in another network namespace, so the CLI can tell
// the user where to run instead of just "not found".
package netdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/procfs"
)

// ErrNoInterface is returned (wrapped) when the interface does not exist in
// this network namespace.
var ErrNoInterface = errors.New("no such network interface")

// FS reads interfaces below a root ("/" live, a fixture in tests).
type FS struct{ procfs.FS }

// NewFS reads below root.
func NewFS(root string) FS { return FS{procfs.FS{Root: root}} }

// Default reads the live system.
var Default = NewFS("/")

// RXQueue is one /sys/class/net/IF/queues/rx-N.
type RXQueue struct {
	Index int `json:"index"`
	// RPSCPUs is rps_cpus: the CPUs RPS steers this queue's packets to;
	// empty means RPS is off for the queue.
	RPSCPUs cpuset.Set `json:"rps_cpus"`
	// RPSKnown is false when rps_cpus is absent (kernel without CONFIG_RPS).
	RPSKnown bool `json:"rps_known"`
	// RPSFlowCnt is rps_flow_cnt (RFS flow table entries), -1 when absent.
	RPSFlowCnt int64 `json:"rps_flow_cnt"`
}

// TXQueue is one /sys/class/net/IF/queues/tx-N.
type TXQueue struct {
	Index int `json:"index"`
	// XPSCPUs is xps_cpus: the CPUs that transmit on this queue; empty means
	// XPS is unset for the queue.
	XPSCPUs cpuset.Set `json:"xps_cpus"`
	// XPSKnown is false when xps_cpus cannot be read: single-queue devices
	// (lo) and kernels without CONFIG_XPS do not offer it.
	XPSKnown bool `json:"xps_known"`
}

// Interface is one network interface as sysfs describes it.
type Interface struct {
	Name      string `json:"name"`
	Index     int    `json:"ifindex"`
	OperState string `json:"operstate"` // "up", "down", "unknown" (lo, some virtual devices), ...
	// Up is true for operstate "up", and for "unknown" with IFF_UP set —
	// loopback and tunnels never report "up".
	Up  bool `json:"up"`
	MTU int  `json:"mtu"`
	// Driver is the name of the device's driver from the device/driver link;
	// empty for devices without a bus device (lo, veth, bridges). The
	// ethtool package reports the driver of those.
	Driver string `json:"driver,omitempty"`
	// Virtual is true for software devices (/sys/devices/virtual/net):
	// no IRQs, no PCI NUMA node.
	Virtual bool `json:"virtual"`
	// NUMANode is device/numa_node; nil when the device has none or the
	// kernel reports -1 (no affinity, typical in VMs).
	NUMANode *int      `json:"numa_node"`
	RX       []RXQueue `json:"rx_queues"`
	TX       []TXQueue `json:"tx_queues"`
}

const iffUp = 0x1

// Interface reads one interface. A name not present here returns an error
// wrapping ErrNoInterface.
func (fs FS) Interface(name string) (Interface, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return Interface{}, fmt.Errorf("%q: %w", name, ErrNoInterface)
	}
	dir := "/sys/class/net/" + name
	if _, err := os.Stat(fs.Path(dir)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Interface{}, fmt.Errorf("%s: %w", name, ErrNoInterface)
		}
		return Interface{}, err
	}
	it := Interface{Name: name}
	idx, err := fs.ReadInt(dir + "/ifindex")
	if err != nil {
		return it, fmt.Errorf("interface %s: %w", name, err)
	}
	it.Index = int(idx)
	if s, err := fs.ReadString(dir + "/operstate"); err == nil {
		it.OperState = strings.TrimSpace(s)
	}
	if mtu, err := fs.ReadInt(dir + "/mtu"); err == nil {
		it.MTU = int(mtu)
	}
	flags, flagsErr := fs.readHex(dir + "/flags")
	it.Up = it.OperState == "up" || (it.OperState == "unknown" && flagsErr == nil && flags&iffUp != 0)

	// /sys/class/net/IF is a symlink into the device tree; software devices
	// live under /sys/devices/virtual/net.
	if target, err := os.Readlink(fs.Path(dir)); err == nil {
		it.Virtual = strings.Contains(target, "/devices/virtual/")
	}
	if target, err := os.Readlink(fs.Path(dir + "/device/driver")); err == nil {
		it.Driver = filepath.Base(target)
	}
	if n, err := fs.ReadInt(dir + "/device/numa_node"); err == nil && n >= 0 {
		node := int(n)
		it.NUMANode = &node
	}
	if it.RX, it.TX, err = fs.queues(name); err != nil {
		return it, err
	}
	return it, nil
}

func (fs FS) readHex(path string) (uint64, error) {
	s, err := fs.ReadString(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0x"), 16, 64)
}

func (fs FS) queues(name string) ([]RXQueue, []TXQueue, error) {
	qdir := "/sys/class/net/" + name + "/queues"
	entries, err := os.ReadDir(fs.Path(qdir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cfs := cpuset.FS{FS: fs.FS}
	var rx []RXQueue
	var tx []TXQueue
	for _, e := range entries {
		kind, num, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		base := qdir + "/" + e.Name()
		switch kind {
		case "rx":
			q := RXQueue{Index: n, RPSFlowCnt: -1}
			q.RPSCPUs, err = cfs.ReadMask(base + "/rps_cpus")
			switch {
			case err == nil:
				q.RPSKnown = true
			case !errors.Is(err, os.ErrNotExist):
				return nil, nil, err
			}
			if v, err := fs.ReadInt(base + "/rps_flow_cnt"); err == nil {
				q.RPSFlowCnt = v
			}
			rx = append(rx, q)
		case "tx":
			q := TXQueue{Index: n}
			// Reading xps_cpus fails with ENOENT on single-queue devices
			// although the file is listed: treat every error as "unknown".
			if s, err := cfs.ReadMask(base + "/xps_cpus"); err == nil {
				q.XPSCPUs, q.XPSKnown = s, true
			}
			tx = append(tx, q)
		}
	}
	sort.Slice(rx, func(i, j int) bool { return rx[i].Index < rx[j].Index })
	sort.Slice(tx, func(i, j int) bool { return tx[i].Index < tx[j].Index })
	return rx, tx, nil
}

// InterfaceNames lists the interfaces of this network namespace, sorted, for
// error messages ("known interfaces: eth0, lo").
func (fs FS) InterfaceNames() ([]string, error) {
	entries, err := os.ReadDir(fs.Path("/sys/class/net"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		// bonding_masters is a file, not an interface.
		if e.Type()&os.ModeSymlink != 0 || e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// MSIIRQs lists the IRQ numbers of the interface's device from
// device/msi_irqs; nil for virtual devices and devices without MSI.
func (fs FS) MSIIRQs(name string) ([]int, error) {
	entries, err := os.ReadDir(fs.Path("/sys/class/net/" + name + "/device/msi_irqs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var irqs []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			irqs = append(irqs, n)
		}
	}
	sort.Ints(irqs)
	return irqs, nil
}
