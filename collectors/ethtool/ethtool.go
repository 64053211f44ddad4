// Package ethtool reads what a NIC driver reports through the ethtool
// interface: driver info, the driver's own statistics (ethtool -S) turned
// into per-queue counters by one naming table, channels (ethtool -l),
// offload features (ethtool -k: GRO, GSO, TSO, rx-udp-gro-forwarding) and
// the RSS indirection table and hash (ethtool -x). Source is the small
// interface callers use: Ioctl reads a live interface, Recorded replays
// ethtool's text output captured on real hosts.
package ethtool

import (
	"fmt"

	"github.com/perfscope/perfscope/base/ethtoolioctl"
)

// ErrNotSupported is returned (wrapped) when the driver does not implement a
// request — veth has no RSS indirection table, lo no statistics.
var ErrNotSupported = ethtoolioctl.ErrNotSupported

// ErrNoDevice is returned (wrapped) when the interface does not exist.
var ErrNoDevice = ethtoolioctl.ErrNoDevice

// Source is where ethtool data comes from.
type Source interface {
	DriverInfo(iface string) (DriverInfo, error)
	// Stats returns the driver's statistics in the driver's order.
	Stats(iface string) ([]Stat, error)
	Channels(iface string) (Channels, error)
	Features(iface string) (Features, error)
	RSS(iface string) (RSS, error)
}

// DriverInfo is ETHTOOL_GDRVINFO (ethtool -i).
type DriverInfo struct {
	Driver          string `json:"driver"`
	Version         string `json:"version,omitempty"`
	FirmwareVersion string `json:"firmware_version,omitempty"`
	// BusInfo is the PCI address ("0000:03:00.0") for PCI NICs; mlx5 and
	// ena name their IRQs by it.
	BusInfo string `json:"bus_info,omitempty"`
}

// Stat is one driver statistic (ethtool -S).
type Stat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// SubStats returns cur − prev by name; statistics absent from prev, or that
// went backwards (driver reset), count from zero.
func SubStats(cur, prev []Stat) []Stat {
	old := make(map[string]uint64, len(prev))
	for _, s := range prev {
		old[s.Name] = s.Value
	}
	out := make([]Stat, len(cur))
	for i, s := range cur {
		v := s.Value
		if p, ok := old[s.Name]; ok && p <= v {
			v -= p
		}
		out[i] = Stat{Name: s.Name, Value: v}
	}
	return out
}

// Channels is ETHTOOL_GCHANNELS (ethtool -l). Zero means the driver has no
// such kind of channel ("n/a").
type Channels struct {
	MaxRX       uint32 `json:"max_rx"`
	MaxTX       uint32 `json:"max_tx"`
	MaxOther    uint32 `json:"max_other"`
	MaxCombined uint32 `json:"max_combined"`
	RX          uint32 `json:"rx"`
	TX          uint32 `json:"tx"`
	Other       uint32 `json:"other"`
	Combined    uint32 `json:"combined"`
}

// RXQueues is the number of queues receiving (combined + RX-only).
func (c Channels) RXQueues() int { return int(c.Combined + c.RX) }

// MaxRXQueues is the most the hardware offers.
func (c Channels) MaxRXQueues() int { return int(c.MaxCombined + c.MaxRX) }

// Feature is one netdev feature (ethtool -k), by its kernel name
// ("rx-gro", "tx-generic-segmentation", "rx-udp-gro-forwarding").
type Feature struct {
	Name      string `json:"name"`
	Active    bool   `json:"active"`
	Requested bool   `json:"requested"`
	// Fixed features cannot be changed with ethtool -K.
	Fixed bool `json:"fixed"`
}

// Features is the device's feature list.
type Features []Feature

// Kernel names of the features the network diagnosis reads.
const (
	FeatureGRO              = "rx-gro"
	FeatureGSO              = "tx-generic-segmentation"
	FeatureTSO              = "tx-tcp-segmentation"
	FeatureLRO              = "rx-lro"
	FeatureGROHW            = "rx-gro-hw"
	FeatureGROList          = "rx-gro-list"
	FeatureUDPGROForwarding = "rx-udp-gro-forwarding"
	// FeatureNTuple is ntuple filters, which accelerated RFS steers with.
	FeatureNTuple = "rx-ntuple-filter"
)

// Lookup finds a feature by kernel name.
func (fs Features) Lookup(name string) (Feature, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}

// Active returns whether the named feature is on; nil when the device does
// not list it.
func (fs Features) Active(name string) *bool {
	f, ok := fs.Lookup(name)
	if !ok {
		return nil
	}
	return &f.Active
}

// RSS is the receive-side scaling configuration (ethtool -x).
type RSS struct {
	// RXRings is the number of RX rings the table may point at (0 when the
	// driver does not say).
	RXRings uint32 `json:"rx_rings"`
	// Indirection maps hash buckets to RX queues.
	Indirection []uint32 `json:"indirection"`
	// Key is the hash key (hex in JSON); HashFunction is "toeplitz", "xor",
	// "crc32" or "" when unknown.
	Key          HexBytes `json:"key"`
	HashFunction string   `json:"hash_function,omitempty"`
}

// QueuesUsed returns the distinct queues the indirection table points at —
// Makita's ens1f0 table covered queues 0-15 of 20.
func (r RSS) QueuesUsed() []int {
	seen := map[uint32]bool{}
	var out []int
	for _, q := range r.Indirection {
		if !seen[q] {
			seen[q] = true
			out = append(out, int(q))
		}
	}
	sortInts(out)
	return out
}

// HexBytes marshals as "6d:5a:56:da" like ethtool prints keys.
type HexBytes []byte

// MarshalText writes colon-separated hex.
func (h HexBytes) MarshalText() ([]byte, error) {
	out := make([]byte, 0, len(h)*3)
	for i, b := range h {
		if i > 0 {
			out = append(out, ':')
		}
		out = fmt.Appendf(out, "%02x", b)
	}
	return out, nil
}

// UnmarshalText reads colon-separated hex.
func (h *HexBytes) UnmarshalText(text []byte) error {
	b, err := parseHexKey(string(text))
	if err != nil {
		return err
	}
	*h = b
	return nil
}
