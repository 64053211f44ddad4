package netapply

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/diagnose"
)

// ethtool changes go through SIOCETHTOOL, the interface every driver and
// kernel supports for these settings (ethtool's netlink lacks RSS writes
// before 6.14). The well-known Go ethtool libraries either lack ring,
// coalesce and channel writes (mdlayher/ethtool) or read RSS tables into a
// fixed 256-entry buffer the kernel overruns on larger devices
// (safchain/ethtool), so the few commands are encoded here.

type featureHandler struct{ noGuard }

func (featureHandler) read(s *System, c diagnose.Change) (state, error) {
	et, err := need(s.Ethtool, "ethtool")
	if err != nil {
		return state{}, err
	}
	on, err := et.Feature(c.Iface, c.Feature)
	if err != nil {
		return state{}, err
	}
	return state{value: onOff(on)}, nil
}

func (featureHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	return s.Ethtool.SetFeature(c.Iface, c.Feature, value == diagnose.ValueOn)
}

func (featureHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	return value == st.value
}

func onOff(b bool) string {
	if b {
		return diagnose.ValueOn
	}
	return diagnose.ValueOff
}

// paramsHandler: ring sizes, coalescing and channel counts. Only the
// parameters the change names are read, compared and written.
type paramsHandler struct{ noGuard }

func (paramsHandler) read(s *System, c diagnose.Change) (state, error) {
	et, err := need(s.Ethtool, "ethtool")
	if err != nil {
		return state{}, err
	}
	all, err := et.Params(c.Kind, c.Iface)
	if err != nil {
		return state{}, err
	}
	named, err := diagnose.ParseParams(c.New, diagnose.ParamNames(c.Kind))
	if err != nil {
		return state{}, err
	}
	cur := map[string]uint32{}
	for k := range named {
		cur[k] = all[k]
	}
	return state{value: diagnose.FormatParams(cur)}, nil
}

func (paramsHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	p, err := diagnose.ParseParams(value, diagnose.ParamNames(c.Kind))
	if err != nil {
		return err
	}
	return s.Ethtool.SetParams(c.Kind, c.Iface, p)
}

func (paramsHandler) same(c diagnose.Change, value string, _ *Saved, st state) bool {
	want, err := diagnose.ParseParams(value, diagnose.ParamNames(c.Kind))
	return err == nil && diagnose.FormatParams(want) == st.value
}

type rssHandler struct{ noGuard }

func (rssHandler) read(s *System, c diagnose.Change) (state, error) {
	et, err := need(s.Ethtool, "ethtool")
	if err != nil {
		return state{}, err
	}
	t, err := et.RSSTable(c.Iface)
	if err != nil {
		return state{}, err
	}
	return state{value: diagnose.EthtoolRSSChange("", t, t).Old}, nil
}

func (rssHandler) guard(s *System, c diagnose.Change, st state) error {
	if len(strings.Fields(st.value)) != len(strings.Fields(c.New)) {
		return fmt.Errorf("the indirection table of %s now has %d entries, not the %d the run read", c.Iface, len(strings.Fields(st.value)), len(strings.Fields(c.New)))
	}
	return nil
}

func (rssHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	t, err := diagnose.ParseTable(value)
	if err != nil {
		return err
	}
	return s.Ethtool.SetRSSTable(c.Iface, t)
}

func (rssHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	a, errA := diagnose.ParseTable(value)
	b, errB := diagnose.ParseTable(st.value)
	return errA == nil && errB == nil && slices.Equal(a, b)
}

// --- SIOCETHTOOL ---------------------------------------------------------------

// ErrEthtoolUnsupported: the driver does not implement the operation.
var ErrEthtoolUnsupported = errors.New("not supported by the driver")

type ioctlEthtool struct{}

// ifreq is struct ifreq with ifr_data, 40 bytes on 64-bit Linux.
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtoolCall(iface string, buf []byte) error {
	if err := diagnose.ValidIfaceName(iface); err != nil {
		return err
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
	case errno == unix.EOPNOTSUPP || errno == 524: // ENOTSUPP leaked by some drivers
		return fmt.Errorf("%s: %w", iface, ErrEthtoolUnsupported)
	}
	return fmt.Errorf("%s: %w", iface, errno)
}

func ethtoolCmd(cmd uint32, size int) []byte {
	b := make([]byte, size)
	binary.NativeEndian.PutUint32(b, cmd)
	return b
}

func u32At(b []byte, off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }

func putU32(b []byte, off int, v uint32) { binary.NativeEndian.PutUint32(b[off:], v) }

// featureIndex finds a feature's bit in the ETH_SS_FEATURES string set.
func featureIndex(iface, name string) (idx, nBits int, err error) {
	const ethSSFeatures = 4
	info := ethtoolCmd(unix.ETHTOOL_GSSET_INFO, 20)
	binary.NativeEndian.PutUint64(info[8:], 1<<ethSSFeatures)
	if err := ethtoolCall(iface, info); err != nil {
		return 0, 0, fmt.Errorf("feature names: %w", err)
	}
	n := int(u32At(info, 16))
	if binary.NativeEndian.Uint64(info[8:])&(1<<ethSSFeatures) == 0 || n <= 0 || n > 4096 {
		return 0, 0, fmt.Errorf("feature names of %s: %w", iface, ErrEthtoolUnsupported)
	}
	strs := ethtoolCmd(unix.ETHTOOL_GSTRINGS, 12+32*n)
	putU32(strs, 4, ethSSFeatures)
	putU32(strs, 8, uint32(n))
	if err := ethtoolCall(iface, strs); err != nil {
		return 0, 0, fmt.Errorf("feature names: %w", err)
	}
	for i := 0; i < n; i++ {
		s := strs[12+32*i : 12+32*(i+1)]
		if j := slices.Index(s, 0); j >= 0 {
			s = s[:j]
		}
		if string(s) == name {
			return i, n, nil
		}
	}
	return 0, 0, fmt.Errorf("%s has no feature %q", iface, name)
}

func (ioctlEthtool) Feature(iface, name string) (bool, error) {
	idx, n, err := featureIndex(iface, name)
	if err != nil {
		return false, err
	}
	blocks := (n + 31) / 32
	// struct ethtool_gfeatures: cmd, size, {available, requested,
	// active, never_changed}[size].
	buf := ethtoolCmd(unix.ETHTOOL_GFEATURES, 8+16*blocks)
	putU32(buf, 4, uint32(blocks))
	if err := ethtoolCall(iface, buf); err != nil {
		return false, fmt.Errorf("read features: %w", err)
	}
	active := u32At(buf, 8+16*(idx/32)+8)
	return active&(1<<(idx%32)) != 0, nil
}

func (ioctlEthtool) SetFeature(iface, name string, on bool) error {
	idx, n, err := featureIndex(iface, name)
	if err != nil {
		return err
	}
	blocks := (n + 31) / 32
	// struct ethtool_sfeatures: cmd, size, {valid, requested}[size]; only
	// the valid bit's feature changes.
	buf := ethtoolCmd(unix.ETHTOOL_SFEATURES, 8+8*blocks)
	putU32(buf, 4, uint32(blocks))
	bit := uint32(1) << (idx % 32)
	putU32(buf, 8+8*(idx/32), bit)
	if on {
		putU32(buf, 8+8*(idx/32)+4, bit)
	}
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("set feature %s %s: %w", name, onOff(on), err)
	}
	return nil
}

// paramLayout is where a kind's parameters sit in its ethtool struct: the
// struct's size, its get and set commands, and the offset of the first
// settable field (after the read-only maximums of rings and channels).
type paramLayout struct {
	size     int
	get, set uint32
	first    int
}

func layout(kind diagnose.ChangeKind) (paramLayout, error) {
	switch kind {
	case diagnose.ChangeEthtoolRing:
		// struct ethtool_ringparam: cmd, 4 maximums, rx, rx_mini, rx_jumbo, tx.
		return paramLayout{36, unix.ETHTOOL_GRINGPARAM, unix.ETHTOOL_SRINGPARAM, 20}, nil
	case diagnose.ChangeEthtoolCoalesce:
		// struct ethtool_coalesce: cmd and 22 u32 in CoalesceParams' order.
		return paramLayout{92, unix.ETHTOOL_GCOALESCE, unix.ETHTOOL_SCOALESCE, 4}, nil
	case diagnose.ChangeEthtoolChannels:
		// struct ethtool_channels: cmd, 4 maximums, rx, tx, other, combined.
		return paramLayout{36, unix.ETHTOOL_GCHANNELS, unix.ETHTOOL_SCHANNELS, 20}, nil
	}
	return paramLayout{}, fmt.Errorf("%w: %s has no ethtool parameters", diagnose.ErrInvalidChange, kind)
}

func (ioctlEthtool) Params(kind diagnose.ChangeKind, iface string) (map[string]uint32, error) {
	l, err := layout(kind)
	if err != nil {
		return nil, err
	}
	buf := ethtoolCmd(l.get, l.size)
	if err := ethtoolCall(iface, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	out := map[string]uint32{}
	for i, name := range diagnose.ParamNames(kind) {
		out[name] = u32At(buf, l.first+4*i)
	}
	return out, nil
}

// SetParams reads the struct, changes the named fields and writes it
// back, as ethtool does: the others keep their values.
func (ioctlEthtool) SetParams(kind diagnose.ChangeKind, iface string, p map[string]uint32) error {
	l, err := layout(kind)
	if err != nil {
		return err
	}
	buf := ethtoolCmd(l.get, l.size)
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("read %s: %w", kind, err)
	}
	for i, name := range diagnose.ParamNames(kind) {
		if v, ok := p[name]; ok {
			putU32(buf, l.first+4*i, v)
		}
	}
	putU32(buf, 0, l.set)
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("set %s %s: %w", kind, diagnose.FormatParams(p), err)
	}
	return nil
}

func (ioctlEthtool) RSSTable(iface string) ([]uint32, error) {
	// struct ethtool_rxfh_indir: cmd, size, ring_index[size]; size 0
	// asks for the device's size.
	head := ethtoolCmd(unix.ETHTOOL_GRXFHINDIR, 8)
	if err := ethtoolCall(iface, head); err != nil {
		return nil, fmt.Errorf("read RSS table: %w", err)
	}
	n := int(u32At(head, 4))
	if n <= 0 || n > diagnose.MaxRSSTable {
		return nil, fmt.Errorf("read RSS table of %s: %d entries", iface, n)
	}
	buf := ethtoolCmd(unix.ETHTOOL_GRXFHINDIR, 8+4*n)
	putU32(buf, 4, uint32(n))
	if err := ethtoolCall(iface, buf); err != nil {
		return nil, fmt.Errorf("read RSS table: %w", err)
	}
	t := make([]uint32, n)
	for i := range t {
		t[i] = u32At(buf, 8+4*i)
	}
	return t, nil
}

func (ioctlEthtool) SetRSSTable(iface string, t []uint32) error {
	buf := ethtoolCmd(unix.ETHTOOL_SRXFHINDIR, 8+4*len(t))
	putU32(buf, 4, uint32(len(t)))
	for i, q := range t {
		putU32(buf, 8+4*i, q)
	}
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("set RSS table: %w", err)
	}
	return nil
}
