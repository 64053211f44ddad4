package ethtool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ioctl reads a live interface of the caller's network namespace through
// SIOCETHTOOL, the interface every ethtool version and driver supports
// (ethtool netlink lacks per-queue statistics).
type Ioctl struct{}

var _ Source = Ioctl{}

// String sets of ETHTOOL_GSSET_INFO / ETHTOOL_GSTRINGS (linux/ethtool.h).
const (
	ethSSStats    = 1
	ethSSFeatures = 4
	ethGStringLen = 32
)

// ifreq is struct ifreq with ifr_data, 40 bytes on 64-bit Linux.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// call issues one SIOCETHTOOL request; buf starts with the ethtool command.
func call(iface string, buf []byte) error {
	if len(iface) >= unix.IFNAMSIZ || iface == "" {
		return fmt.Errorf("%q: %w", iface, ErrNoDevice)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer unix.Close(fd)
	var req ifreq
	copy(req.name[:], iface)
	req.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(buf)
	switch {
	case errno == 0:
		return nil
	case errno == unix.EOPNOTSUPP || errno == 524: // 524: the kernel-internal ENOTSUPP some drivers leak
		return ErrNotSupported
	case errno == unix.ENODEV:
		return fmt.Errorf("%s: %w", iface, ErrNoDevice)
	}
	return errno
}

func command(cmd uint32, size int) []byte {
	buf := make([]byte, size)
	binary.NativeEndian.PutUint32(buf, cmd)
	return buf
}

func u32(b []byte, off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }

// DriverInfo implements Source.
func (Ioctl) DriverInfo(iface string) (DriverInfo, error) {
	// struct ethtool_drvinfo: cmd, then driver[32] version[32]
	// fw_version[32] bus_info[32] erom_version[32] reserved2[12] and counts.
	buf := command(unix.ETHTOOL_GDRVINFO, 196)
	if err := call(iface, buf); err != nil {
		return DriverInfo{}, fmt.Errorf("ethtool -i %s: %w", iface, err)
	}
	return DriverInfo{
		Driver:          cString(buf[4:36]),
		Version:         cString(buf[36:68]),
		FirmwareVersion: cString(buf[68:100]),
		BusInfo:         cString(buf[100:132]),
	}, nil
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// stringSetLen is ETHTOOL_GSSET_INFO for one string set.
func stringSetLen(iface string, set uint32) (int, error) {
	// struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[].
	buf := command(unix.ETHTOOL_GSSET_INFO, 20)
	binary.NativeEndian.PutUint64(buf[8:], 1<<set)
	if err := call(iface, buf); err != nil {
		return 0, err
	}
	if binary.NativeEndian.Uint64(buf[8:])&(1<<set) == 0 {
		return 0, ErrNotSupported
	}
	return int(u32(buf, 16)), nil
}

// stringSet is ETHTOOL_GSTRINGS.
func stringSet(iface string, set uint32, n int) ([]string, error) {
	// struct ethtool_gstrings: cmd, string_set, len, data[len*32].
	buf := command(unix.ETHTOOL_GSTRINGS, 12+n*ethGStringLen)
	binary.NativeEndian.PutUint32(buf[4:], set)
	binary.NativeEndian.PutUint32(buf[8:], uint32(n))
	if err := call(iface, buf); err != nil {
		return nil, err
	}
	if got := int(u32(buf, 8)); got < n {
		n = got
	}
	out := make([]string, n)
	for i := range out {
		out[i] = cString(buf[12+i*ethGStringLen : 12+(i+1)*ethGStringLen])
	}
	return out, nil
}

// maxStrings bounds the buffers a driver's claimed counts make us allocate.
const maxStrings = 1 << 16

// Stats implements Source with ETHTOOL_GSSET_INFO, GSTRINGS and GSTATS.
func (Ioctl) Stats(iface string) ([]Stat, error) {
	n, err := stringSetLen(iface, ethSSStats)
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: %w", iface, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("ethtool -S %s: %w", iface, ErrNotSupported)
	}
	if n > maxStrings {
		return nil, fmt.Errorf("ethtool -S %s: driver claims %d statistics", iface, n)
	}
	names, err := stringSet(iface, ethSSStats, n)
	if err != nil {
		return nil, fmt.Errorf("ethtool -S %s: names: %w", iface, err)
	}
	// struct ethtool_stats: cmd, n_stats, u64 data[n].
	buf := command(unix.ETHTOOL_GSTATS, 8+8*len(names))
	binary.NativeEndian.PutUint32(buf[4:], uint32(len(names)))
	if err := call(iface, buf); err != nil {
		return nil, fmt.Errorf("ethtool -S %s: values: %w", iface, err)
	}
	if got := int(u32(buf, 4)); got < len(names) {
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
	buf := command(unix.ETHTOOL_GCHANNELS, 36)
	if err := call(iface, buf); err != nil {
		return Channels{}, fmt.Errorf("ethtool -l %s: %w", iface, err)
	}
	return Channels{
		MaxRX: u32(buf, 4), MaxTX: u32(buf, 8), MaxOther: u32(buf, 12), MaxCombined: u32(buf, 16),
		RX: u32(buf, 20), TX: u32(buf, 24), Other: u32(buf, 28), Combined: u32(buf, 32),
	}, nil
}

// Features implements Source with ETHTOOL_GFEATURES and the ETH_SS_FEATURES
// names.
func (Ioctl) Features(iface string) (Features, error) {
	n, err := stringSetLen(iface, ethSSFeatures)
	if err != nil {
		return nil, fmt.Errorf("ethtool -k %s: %w", iface, err)
	}
	if n > maxStrings {
		return nil, fmt.Errorf("ethtool -k %s: driver claims %d features", iface, n)
	}
	names, err := stringSet(iface, ethSSFeatures, n)
	if err != nil {
		return nil, fmt.Errorf("ethtool -k %s: names: %w", iface, err)
	}
	// struct ethtool_gfeatures: cmd, size, then size blocks of
	// {available, requested, active, never_changed}.
	blocks := (len(names) + 31) / 32
	buf := command(unix.ETHTOOL_GFEATURES, 8+16*blocks)
	binary.NativeEndian.PutUint32(buf[4:], uint32(blocks))
	if err := call(iface, buf); err != nil {
		return nil, fmt.Errorf("ethtool -k %s: %w", iface, err)
	}
	out := make(Features, 0, len(names))
	for i, name := range names {
		if name == "" {
			continue
		}
		block := 8 + 16*(i/32)
		bit := uint32(1) << (i % 32)
		available, requested, active := u32(buf, block), u32(buf, block+4), u32(buf, block+8)
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
	rings := command(unix.ETHTOOL_GRXRINGS, 256)
	if err := call(iface, rings); err == nil {
		r.RXRings = uint32(binary.NativeEndian.Uint64(rings[8:]))
	}

	// struct ethtool_rxfh: cmd, rss_context, indir_size, key_size, hfunc,
	// input_xfrm, rsvd8[2], rsvd32, then indir_size u32s and key bytes.
	const header = 24
	sizes := command(unix.ETHTOOL_GRSSH, header)
	err := call(iface, sizes)
	if errors.Is(err, ErrNotSupported) {
		return rssFromIndir(iface, r)
	}
	if err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	indirSize, keySize := int(u32(sizes, 8)), int(u32(sizes, 12))
	if indirSize > maxStrings || keySize > 4096 {
		return r, fmt.Errorf("ethtool -x %s: implausible sizes %d/%d", iface, indirSize, keySize)
	}
	buf := command(unix.ETHTOOL_GRSSH, header+4*indirSize+keySize)
	binary.NativeEndian.PutUint32(buf[8:], uint32(indirSize))
	binary.NativeEndian.PutUint32(buf[12:], uint32(keySize))
	if err := call(iface, buf); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	for _, f := range hashFunctions {
		if buf[16]&f.bit != 0 {
			r.HashFunction = f.name
		}
	}
	r.Indirection = make([]uint32, indirSize)
	for i := range r.Indirection {
		r.Indirection[i] = u32(buf, header+4*i)
	}
	r.Key = append(HexBytes(nil), buf[header+4*indirSize:]...)
	if indirSize == 0 {
		return r, fmt.Errorf("ethtool -x %s: no indirection table: %w", iface, ErrNotSupported)
	}
	return r, nil
}

func rssFromIndir(iface string, r RSS) (RSS, error) {
	// struct ethtool_rxfh_indir: cmd, size, ring_index[size].
	sizes := command(unix.ETHTOOL_GRXFHINDIR, 8)
	if err := call(iface, sizes); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	n := int(u32(sizes, 4))
	if n == 0 || n > maxStrings {
		return r, fmt.Errorf("ethtool -x %s: indirection table of %d entries: %w", iface, n, ErrNotSupported)
	}
	buf := command(unix.ETHTOOL_GRXFHINDIR, 8+4*n)
	binary.NativeEndian.PutUint32(buf[4:], uint32(n))
	if err := call(iface, buf); err != nil {
		return r, fmt.Errorf("ethtool -x %s: %w", iface, err)
	}
	r.Indirection = make([]uint32, n)
	for i := range r.Indirection {
		r.Indirection[i] = u32(buf, 8+4*i)
	}
	return r, nil
}
