package irq

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// QueueKind says which direction an IRQ serves.
type QueueKind string

const (
	// Combined IRQs serve an RX and a TX queue of the same index (ixgbe
	// "TxRx", mlx5 completion vectors).
	Combined QueueKind = "txrx"
	RX       QueueKind = "rx"
	TX       QueueKind = "tx"
	// Other IRQs belong to the device but to no queue (link, mailbox,
	// virtio config); Queue is -1.
	Other QueueKind = "other"
)

// Device names a NIC the way drivers name its IRQs: by interface name
// (ixgbe, i40e, ice, bnxt, ena), by PCI address (mlx5, mlx4, ena's
// management IRQ) or by virtio device (virtio_net).
type Device struct {
	Interface string `json:"interface"`
	// PCIAddress is "0000:03:00.0" (ethtool bus-info), empty if not PCI.
	PCIAddress string `json:"pci_address,omitempty"`
	// Virtio is the virtio device ("virtio2", the basename of
	// /sys/class/net/IF/device) for virtio_net.
	Virtio string `json:"virtio,omitempty"`
	// MSIIRQs are the device's IRQ numbers from device/msi_irqs; IRQs of the
	// device whose names match no pattern are reported as Other.
	MSIIRQs []int `json:"msi_irqs,omitempty"`
}

// QueueIRQ is one IRQ of the device and the queue it serves.
type QueueIRQ struct {
	IRQ   int       `json:"irq"`
	Name  string    `json:"name"`
	Kind  QueueKind `json:"kind"`
	Queue int       `json:"queue"` // -1 for Other
}

// irqNaming is THE table of how drivers name their queue IRQs. {if}, {pci}
// and {virtio} are replaced by the device's names; the one capture group is
// the queue index. Order matters: the first matching row wins.
var irqNaming = []struct {
	drivers string // documentation: who prints this form
	pattern string
	kind    QueueKind
}{
	{"ixgbe, igb, igc, bnxt_en, ice (old), ixgbevf", `^{if}-TxRx-(\d+)$`, Combined},
	{"i40e, ice, iavf: driver-prefixed", `^(?:i40e|ice|iavf)-{if}-TxRx-(\d+)$`, Combined},
	{"ixgbe, igb, i40e with separate vectors", `^(?:(?:i40e|ice|iavf)-)?{if}-rx-(\d+)$`, RX},
	{"ixgbe, igb, i40e with separate vectors", `^(?:(?:i40e|ice|iavf)-)?{if}-tx-(\d+)$`, TX},
	{"ena (IO queues)", `^{if}-Tx-Rx-(\d+)$`, Combined},
	{"ena (as some tools print it)", `^ena-io-(\d+)(?:@pci:{pci})?$`, Combined},
	{"mlx5_core completion vectors", `^mlx5_comp(\d+)@pci:{pci}$`, Combined},
	{"mlx4_en", `^mlx4-(\d+)@(?:pci:)?{pci}$`, Combined},
	{"virtio_net (virtio-pci MSI-X per queue)", `^{virtio}-input\.(\d+)$`, RX},
	{"virtio_net", `^{virtio}-output\.(\d+)$`, TX},
	{"sfc, hv_netvsc, gve-style numbered vectors", `^{if}-(\d+)$`, Combined},
}

// QueueIRQs picks the IRQs of dev out of /proc/interrupts and maps each to
// its queue. IRQs listed in dev.MSIIRQs that match no pattern are returned
// with Kind Other. The result is sorted by IRQ number.
func QueueIRQs(in Interrupts, dev Device) []QueueIRQ {
	patterns := compileNaming(dev)
	msi := map[int]bool{}
	for _, n := range dev.MSIIRQs {
		msi[n] = true
	}
	var out []QueueIRQ
	for _, l := range in.Lines {
		if l.IRQ < 0 {
			continue
		}
		matched := false
		for _, action := range l.Actions() {
			if q, ok := matchQueue(patterns, action); ok {
				q.IRQ = l.IRQ
				out = append(out, q)
				matched = true
				break
			}
		}
		if !matched && msi[l.IRQ] {
			out = append(out, QueueIRQ{IRQ: l.IRQ, Name: l.Name, Kind: Other, Queue: -1})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IRQ < out[j].IRQ })
	return out
}

type compiledNaming struct {
	re   *regexp.Regexp
	kind QueueKind
}

func compileNaming(dev Device) []compiledNaming {
	var out []compiledNaming
	for _, row := range irqNaming {
		p := row.pattern
		for placeholder, value := range map[string]string{"{if}": dev.Interface, "{pci}": dev.PCIAddress, "{virtio}": dev.Virtio} {
			if !strings.Contains(p, placeholder) {
				continue
			}
			if value == "" {
				p = "" // this naming needs a name the device does not have
				break
			}
			p = strings.ReplaceAll(p, placeholder, regexp.QuoteMeta(value))
		}
		if p != "" {
			out = append(out, compiledNaming{regexp.MustCompile(p), row.kind})
		}
	}
	return out
}

func matchQueue(patterns []compiledNaming, action string) (QueueIRQ, bool) {
	for _, p := range patterns {
		m := p.re.FindStringSubmatch(action)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		return QueueIRQ{Name: action, Kind: p.kind, Queue: n}, true
	}
	return QueueIRQ{}, false
}
