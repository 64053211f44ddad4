package ethtool

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/ethtoolioctl"
)

// Rings is ETHTOOL_GRINGPARAM (ethtool -g): descriptors per RX and TX ring,
// the hardware's maximum and the current setting. A ring that fills between
// two NAPI polls makes the NIC drop (rx_missed_errors, rx_out_of_buffer).
type Rings struct {
	RXMax uint32 `json:"rx_max"`
	TXMax uint32 `json:"tx_max"`
	RX    uint32 `json:"rx"`
	TX    uint32 `json:"tx"`
}

// Coalesce is the part of ETHTOOL_GCOALESCE (ethtool -c) that decides how
// many packets one receive interrupt carries.
type Coalesce struct {
	RXUsecs    uint32 `json:"rx_usecs"`
	RXFrames   uint32 `json:"rx_frames"`
	TXUsecs    uint32 `json:"tx_usecs"`
	TXFrames   uint32 `json:"tx_frames"`
	AdaptiveRX bool   `json:"adaptive_rx"`
	AdaptiveTX bool   `json:"adaptive_tx"`
}

// PerPacketInterrupts reports coalescing off: an interrupt for every
// received packet (rx-usecs 0, rx-frames ≤ 1, not adaptive).
func (c Coalesce) PerPacketInterrupts() bool {
	return !c.AdaptiveRX && c.RXUsecs == 0 && c.RXFrames <= 1
}

// RingSource is implemented by sources that also read rings and
// coalescing (both Ioctl and Recorded do); kept apart from Source so that
// other implementations of Source stay valid.
type RingSource interface {
	Rings(iface string) (Rings, error)
	Coalesce(iface string) (Coalesce, error)
}

// Rings implements RingSource with ETHTOOL_GRINGPARAM.
func (Ioctl) Rings(iface string) (Rings, error) {
	// struct ethtool_ringparam: cmd, rx_max_pending, rx_mini_max_pending,
	// rx_jumbo_max_pending, tx_max_pending, rx_pending, rx_mini_pending,
	// rx_jumbo_pending, tx_pending.
	buf := ethtoolioctl.Request(unix.ETHTOOL_GRINGPARAM, 36)
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return Rings{}, fmt.Errorf("ethtool -g %s: %w", iface, err)
	}
	return Rings{RXMax: ethtoolioctl.U32(buf, 4), TXMax: ethtoolioctl.U32(buf, 16), RX: ethtoolioctl.U32(buf, 20), TX: ethtoolioctl.U32(buf, 32)}, nil
}

// Coalesce implements RingSource with ETHTOOL_GCOALESCE.
func (Ioctl) Coalesce(iface string) (Coalesce, error) {
	// struct ethtool_coalesce: cmd, rx_coalesce_usecs,
	// rx_max_coalesced_frames, rx_coalesce_usecs_irq,
	// rx_max_coalesced_frames_irq, tx_coalesce_usecs,
	// tx_max_coalesced_frames, tx_..._irq ×2, stats_block_coalesce_usecs,
	// use_adaptive_rx_coalesce (offset 40), use_adaptive_tx_coalesce, and
	// eleven more u32s (92 bytes).
	buf := ethtoolioctl.Request(unix.ETHTOOL_GCOALESCE, 92)
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return Coalesce{}, fmt.Errorf("ethtool -c %s: %w", iface, err)
	}
	return Coalesce{RXUsecs: ethtoolioctl.U32(buf, 4), RXFrames: ethtoolioctl.U32(buf, 8), TXUsecs: ethtoolioctl.U32(buf, 20), TXFrames: ethtoolioctl.U32(buf, 24),
		AdaptiveRX: ethtoolioctl.U32(buf, 40) != 0, AdaptiveTX: ethtoolioctl.U32(buf, 44) != 0}, nil
}

// Rings implements RingSource from g.txt.
func (r Recorded) Rings(iface string) (Rings, error) { return replay(r, iface, "g", ParseRings) }

// Coalesce implements RingSource from c.txt.
func (r Recorded) Coalesce(iface string) (Coalesce, error) {
	return replay(r, iface, "c", ParseCoalesce)
}

// recordedNumber reads ethtool's "n/a" (newer versions) or a number; both
// "n/a" and a missing field are 0, which ethtool prints for "not supported"
// in older versions too.
func recordedNumber(v string) (uint32, error) {
	v = strings.TrimSpace(v)
	if v == "n/a" || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	return uint32(n), err
}

// ParseRings reads `ethtool -g` output: "Pre-set maximums:" then "Current
// hardware settings:", each with "RX:" and "TX:" lines.
func ParseRings(r io.Reader) (Rings, error) {
	ls, err := lines(r)
	if err != nil {
		return Rings{}, err
	}
	var out Rings
	section, seen := "", 0
	for _, l := range ls {
		switch {
		case strings.HasPrefix(l, "Pre-set maximums"):
			section = "max"
			continue
		case strings.HasPrefix(l, "Current hardware settings"):
			section = "cur"
			continue
		}
		key, value, ok := strings.Cut(l, ":")
		if !ok || section == "" {
			continue
		}
		var dst *uint32
		switch strings.TrimSpace(key) + "/" + section {
		case "RX/max":
			dst = &out.RXMax
		case "TX/max":
			dst = &out.TXMax
		case "RX/cur":
			dst = &out.RX
		case "TX/cur":
			dst = &out.TX
		default:
			continue
		}
		if *dst, err = recordedNumber(value); err != nil {
			return out, fmt.Errorf("%q: %w", l, err)
		}
		seen++
	}
	if seen < 4 {
		return out, fmt.Errorf("no ring sizes in the output")
	}
	return out, nil
}

// ParseCoalesce reads `ethtool -c` output.
func ParseCoalesce(r io.Reader) (Coalesce, error) {
	ls, err := lines(r)
	if err != nil {
		return Coalesce{}, err
	}
	var out Coalesce
	seen := 0
	for _, l := range ls {
		if rest, ok := strings.CutPrefix(l, "Adaptive RX:"); ok {
			// "Adaptive RX: off  TX: n/a"
			rx, tx, _ := strings.Cut(rest, "TX:")
			out.AdaptiveRX = strings.TrimSpace(rx) == "on"
			out.AdaptiveTX = strings.TrimSpace(tx) == "on"
			seen++
			continue
		}
		key, value, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		var dst *uint32
		switch strings.TrimSpace(key) {
		case "rx-usecs":
			dst = &out.RXUsecs
		case "rx-frames":
			dst = &out.RXFrames
		case "tx-usecs":
			dst = &out.TXUsecs
		case "tx-frames":
			dst = &out.TXFrames
		default:
			continue
		}
		if *dst, err = recordedNumber(value); err != nil {
			return out, fmt.Errorf("%q: %w", l, err)
		}
		seen++
	}
	if seen < 3 {
		return out, fmt.Errorf("no coalescing parameters in the output")
	}
	return out, nil
}

// missedCounters are the device-level statistics that count packets the
// NIC dropped because no RX descriptor was free — the ring (or the host)
// did not keep up — by driver: ixgbe/igb rx_missed_errors (MPC) and
// rx_no_buffer_count (RNBC), mlx5 rx_out_of_buffer, bnxt
// rx_total_discard_pkts, i40e/ice port.rx_dropped and rx_dropped... The
// generic ones are tried for any driver.
var missedCounters = []string{"rx_missed_errors", "rx_no_buffer_count", "rx_out_of_buffer", "rx_total_discard_pkts", "port.rx_dropped", "rx_fifo_errors"}

// Missed sums the counters of missedCounters a driver reports (deltas when
// stats are deltas). names lists the ones found; none found means the
// driver does not say (not that nothing was missed).
func Missed(stats []Stat) (n uint64, names []string) {
	for _, want := range missedCounters {
		for _, s := range stats {
			if s.Name == want {
				n += s.Value
				names = append(names, want)
				break
			}
		}
	}
	return n, names
}
