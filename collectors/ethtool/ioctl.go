package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/ethtoolioctl"
)

// Ioctl reads a live interface of the caller's network namespace through
// SIOCETHTOOL, the interface every ethtool version and driver supports
// (ethtool netlink lacks per-queue statistics).
type Ioctl struct{}

var _ Source = Ioctl{}

// DriverInfo implements Source.
func (Ioctl) DriverInfo(iface string) (DriverInfo, error) {
	// struct ethtool_drvinfo: cmd, then driver[32] version[32]
	// fw_version[32] bus_info[32] erom_version[32] reserved2[12] and counts.
	buf := ethtoolioctl.Request(unix.ETHTOOL_GDRVINFO, 196)
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return DriverInfo{}, fmt.Errorf("ethtool -i %s: %w", iface, err)
	}
	return DriverInfo{
		Driver:          ethtoolioctl.CString(buf[4:36]),
		Version:         ethtoolioctl.CString(buf[36:68]),
		FirmwareVersion: ethtoolioctl.CString(buf[68:100]),
		BusInfo:         ethtoolioctl.CString(buf[100:132]),
	}, nil
}

// Stats implements Source with ETHTOOL_GSSET_INFO, GSTRINGS and GSTATS.
func (Ioctl) Stats(iface string) ([]Stat, error) {
	names, err := ethtoolioctl.StringSet(iface, ethtoolioctl.SetStats)
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: names: %w", iface, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("ethtool -S %s: %w", iface, ErrNotSupported)
	}
	// struct ethtool_stats: cmd, n_stats, u64 data[n].
	buf := ethtoolioctl.Request(unix.ETHTOOL_GSTATS, 8+8*len(names))
	binary.NativeEndian.PutUint32(buf[4:], uint32(len(names)))
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return nil, fmt.Errorf("ethtool -S %s: values: %w", iface, err)
	}
	if got := int(ethtoolioctl.U32(buf, 4)); got < len(names) {
		names = names[:got]
	}
	out := make([]Stat, len(names))
	for i, name := range names {
		out[i] = Stat{Name: name, Value: binary.NativeEndian.Uint64(buf[8+8*i:])}
	}
	return out, nil
}

// Channels implements Source with ETHTOOL_GCHANNELS.
func (Ioctl) Channels(iface string) (Channels, error) {
	buf := ethtoolioctl.Request(unix.ETHTOOL_GCHANNELS, 36)
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return Channels{}, fmt.Errorf("ethtool -l %s: %w", iface, err)
	}
	return Channels{
		MaxRX: ethtoolioctl.U32(buf, 4), MaxTX: ethtoolioctl.U32(buf, 8), MaxOther: ethtoolioctl.U32(buf, 12), MaxCombined: ethtoolioctl.U32(buf, 16),
		RX: ethtoolioctl.U32(buf, 20), TX: ethtoolioctl.U32(buf, 24), Other: ethtoolioctl.U32(buf, 28), Combined: ethtoolioctl.U32(buf, 32),
	}, nil
}

// Features implements Source with ETHTOOL_GFEATURES and the ETH_SS_FEATURES
// names.
func (Ioctl) Features(iface string) (Features, error) {
	names, err := ethtoolioctl.StringSet(iface, ethtoolioctl.SetFeatures)
	if err != nil {
		return nil, fmt.Errorf("ethtool -k %s: names: %w", iface, err)
	}
	// struct ethtool_gfeatures: cmd, size, then size blocks of
	// {available, requested, active, never_changed}.
	blocks := (len(names) + 31) / 32
	buf := ethtoolioctl.Request(unix.ETHTOOL_GFEATURES, 8+16*blocks)
	binary.NativeEndian.PutUint32(buf[4:], uint32(blocks))
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return nil, fmt.Errorf("ethtool -k %s: %w", iface, err)
	}
	out := make(Features, 0, len(names))
	for i, name := range names {
		if name == "" {
			continue
		}
		block := 8 + 16*(i/32)
		bit := uint32(1) << (i % 32)
		available, requested, active := ethtoolioctl.U32(buf, block), ethtoolioctl.U32(buf, block+4), ethtoolioctl.U32(buf, block+8)
		out = append(out, Feature{Name: name, Active: active&bit != 0, Requested: requested&bit != 0, Fixed: available&bit == 0})
	}
	return out, nil
}

// RSS hash function bits (ETH_RSS_HASH_*).
var hashFunctions = []struct {
	bit  uint8
	name string
}{{1, "toeplitz"}, {2, "xor"}, {4, "crc32"}}

// RSS implements Source: ETHTOOL_GRXRINGS for the ring count, then
// ETHTOOL_GRSSH (table, key, function), falling back to ETHTOOL_GRXFHINDIR
// on drivers that only implement the older table request.
func (Ioctl) RSS(iface string) (RSS, error) {
	var r RSS
	// struct ethtool_rxnfc: cmd, flow_type, u64 data, ... (data holds the
	// ring count). The struct is ~190 bytes; the kernel copies it whole.
	rings := ethtoolioctl.Request(unix.ETHTOOL_GRXRINGS, 256)
	if err := ethtoolioctl.Call(iface, rings); err == nil {
		r.RXRings = uint32(binary.NativeEndian.Uint64(rings[8:]))
	}

	// struct ethtool_rxfh: cmd, rss_context, indir_size, key_size, hfunc,
	// input_xfrm, rsvd8[2], rsvd32, then indir_size u32s and key bytes.
	const header = 24
	sizes := ethtoolioctl.Request(unix.ETHTOOL_GRSSH, header)
	err := ethtoolioctl.Call(iface, sizes)
	if errors.Is(err, ErrNotSupported) {
		return rssFromIndir(iface, r)
	}
	if err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	indirSize, keySize := int(ethtoolioctl.U32(sizes, 8)), int(ethtoolioctl.U32(sizes, 12))
	if indirSize > ethtoolioctl.MaxStrings || keySize > 4096 {
		return r, fmt.Errorf("ethtool -x %s: implausible sizes %d/%d", iface, indirSize, keySize)
	}
	buf := ethtoolioctl.Request(unix.ETHTOOL_GRSSH, header+4*indirSize+keySize)
	binary.NativeEndian.PutUint32(buf[8:], uint32(indirSize))
	binary.NativeEndian.PutUint32(buf[12:], uint32(keySize))
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	for _, f := range hashFunctions {
		if buf[16]&f.bit != 0 {
			r.HashFunction = f.name
		}
	}
	r.Indirection = make([]uint32, indirSize)
	for i := range r.Indirection {
		r.Indirection[i] = ethtoolioctl.U32(buf, header+4*i)
	}
	r.Key = append(HexBytes(nil), buf[header+4*indirSize:]...)
	if indirSize == 0 {
		return r, fmt.Errorf("ethtool -x %s: no indirection table: %w", iface, ErrNotSupported)
	}
	return r, nil
}

func rssFromIndir(iface string, r RSS) (RSS, error) {
	// struct ethtool_rxfh_indir: cmd, size, ring_index[size].
	sizes := ethtoolioctl.Request(unix.ETHTOOL_GRXFHINDIR, 8)
	if err := ethtoolioctl.Call(iface, sizes); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	n := int(ethtoolioctl.U32(sizes, 4))
	if n == 0 || n > ethtoolioctl.MaxStrings {
		return r, fmt.Errorf("ethtool -x %s: indirection table of %d entries: %w", iface, n, ErrNotSupported)
	}
	buf := ethtoolioctl.Request(unix.ETHTOOL_GRXFHINDIR, 8+4*n)
	binary.NativeEndian.PutUint32(buf[4:], uint32(n))
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	r.Indirection = make([]uint32, n)
	for i := range r.Indirection {
		r.Indirection[i] = ethtoolioctl.U32(buf, 8+4*i)
	}
	return r, nil
}
