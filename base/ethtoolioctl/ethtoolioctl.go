// Package ethtoolioctl is the raw SIOCETHTOOL request, the interface every
// ethtool version and driver supports, shared by the reader
// (collectors/ethtool) and the executor of typed changes (apply)
// so that the struct ifreq layout, the error mapping and the string-set
// lookup exist once. It knows nothing of what a request means: callers lay
// out the ethtool command structs of linux/ethtool.h in a byte buffer.
package ethtoolioctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned (wrapped) when the driver does not implement
// a request.
var ErrNotSupported = errors.New("not supported by driver")

// ErrNoDevice is returned (wrapped) when the interface does not exist.
var ErrNoDevice = errors.New("no such network interface")

// String sets of ETHTOOL_GSSET_INFO / ETHTOOL_GSTRINGS (linux/ethtool.h).
const (
	SetStats    = 1
	SetFeatures = 4
	stringLen   = 32
)

// MaxStrings bounds the buffers a driver's claimed counts make callers
// allocate.
const MaxStrings = 1 << 16

// ifreq is struct ifreq with ifr_data, 40 bytes on 64-bit Linux.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// Call issues one SIOCETHTOOL request on iface in the caller's network
// namespace; buf starts with the ethtool command and is filled in place.
// Errors are ErrNoDevice (wrapped, naming iface), ErrNotSupported or the
// errno: callers say which request failed on which interface.
func Call(iface string, buf []byte) error {
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

// Request is a zeroed buffer of size bytes starting with command cmd.
func Request(cmd uint32, size int) []byte {
	buf := make([]byte, size)
	binary.NativeEndian.PutUint32(buf, cmd)
	return buf
}

// U32 and PutU32 read and write a native-endian u32 of a request.
func U32(b []byte, off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }

func PutU32(b []byte, off int, v uint32) { binary.NativeEndian.PutUint32(b[off:], v) }

// StringSetLen is ETHTOOL_GSSET_INFO for one string set.
func StringSetLen(iface string, set uint32) (int, error) {
	// struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[].
	buf := Request(unix.ETHTOOL_GSSET_INFO, 20)
	binary.NativeEndian.PutUint64(buf[8:], 1<<set)
	if err := Call(iface, buf); err != nil {
		return 0, err
	}
	if binary.NativeEndian.Uint64(buf[8:])&(1<<set) == 0 {
		return 0, ErrNotSupported
	}
	n := int(U32(buf, 16))
	if n > MaxStrings {
		return 0, fmt.Errorf("driver claims %d strings in set %d", n, set)
	}
	return n, nil
}

// StringSet is ETHTOOL_GSTRINGS: the names of a set, in bit or index
// order (an unnamed slot is "").
func StringSet(iface string, set uint32) ([]string, error) {
	n, err := StringSetLen(iface, set)
	if err != nil || n == 0 {
		return nil, err
	}
	// struct ethtool_gstrings: cmd, string_set, len, data[len*32].
	buf := Request(unix.ETHTOOL_GSTRINGS, 12+n*stringLen)
	PutU32(buf, 4, set)
	PutU32(buf, 8, uint32(n))
	if err := Call(iface, buf); err != nil {
		return nil, err
	}
	n = min(n, int(U32(buf, 8)))
	out := make([]string, n)
	for i := range out {
		out[i] = CString(buf[12+i*stringLen : 12+(i+1)*stringLen])
	}
	return out, nil
}

// CString is a NUL-terminated string field.
func CString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
