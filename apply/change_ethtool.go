package apply

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/ethtoolioctl"
	"github.com/perfscope/perfscope/collectors/ethtool"
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
var ErrEthtoolUnsupported = ethtoolioctl.ErrNotSupported

// ioctlEthtool reads through collectors/ethtool where the reader has what a
// change compares (features, the RSS table) and writes with the same raw
// request (base/ethtoolioctl).
type ioctlEthtool struct{}

// ethtoolCall is one request on a name the kernel would accept, the error
// naming the interface.
func ethtoolCall(iface string, buf []byte) error {
	if err := diagnose.ValidIfaceName(iface); err != nil {
		return err
	}
	if err := ethtoolioctl.Call(iface, buf); err != nil {
		return fmt.Errorf("%s: %w", iface, err)
	}
	return nil
}

func (ioctlEthtool) Feature(iface, name string) (bool, error) {
	if err := diagnose.ValidIfaceName(iface); err != nil {
		return false, err
	}
	fs, err := ethtool.Ioctl{}.Features(iface)
	if err != nil {
		return false, fmt.Errorf("read features: %w", err)
	}
	for _, f := range fs {
		if f.Name == name {
			return f.Active, nil
		}
	}
	return false, fmt.Errorf("%s has no feature %q", iface, name)
}

func (ioctlEthtool) SetFeature(iface, name string, on bool) error {
	if err := diagnose.ValidIfaceName(iface); err != nil {
		return err
	}
	names, err := ethtoolioctl.StringSet(iface, ethtoolioctl.SetFeatures)
	if err != nil {
		return fmt.Errorf("%s: feature names: %w", iface, err)
	}
	idx := slices.Index(names, name)
	if idx < 0 {
		return fmt.Errorf("%s has no feature %q", iface, name)
	}
	blocks := (len(names) + 31) / 32
	// struct ethtool_sfeatures: cmd, size, {valid, requested}[size]; only
	// the valid bit's feature changes.
	buf := ethtoolioctl.Request(unix.ETHTOOL_SFEATURES, 8+8*blocks)
	ethtoolioctl.PutU32(buf, 4, uint32(blocks))
	bit := uint32(1) << (idx % 32)
	ethtoolioctl.PutU32(buf, 8+8*(idx/32), bit)
	if on {
		ethtoolioctl.PutU32(buf, 8+8*(idx/32)+4, bit)
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
	buf := ethtoolioctl.Request(l.get, l.size)
	if err := ethtoolCall(iface, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	out := map[string]uint32{}
	for i, name := range diagnose.ParamNames(kind) {
		out[name] = ethtoolioctl.U32(buf, l.first+4*i)
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
	buf := ethtoolioctl.Request(l.get, l.size)
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("read %s: %w", kind, err)
	}
	for i, name := range diagnose.ParamNames(kind) {
		if v, ok := p[name]; ok {
			ethtoolioctl.PutU32(buf, l.first+4*i, v)
		}
	}
	ethtoolioctl.PutU32(buf, 0, l.set)
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("set %s %s: %w", kind, diagnose.FormatParams(p), err)
	}
	return nil
}

func (ioctlEthtool) RSSTable(iface string) ([]uint32, error) {
	if err := diagnose.ValidIfaceName(iface); err != nil {
		return nil, err
	}
	rss, err := ethtool.Ioctl{}.RSS(iface)
	if err != nil {
		return nil, fmt.Errorf("read RSS table: %w", err)
	}
	if n := len(rss.Indirection); n == 0 || n > diagnose.MaxRSSTable {
		return nil, fmt.Errorf("read RSS table of %s: %d entries", iface, n)
	}
	return rss.Indirection, nil
}

func (ioctlEthtool) SetRSSTable(iface string, t []uint32) error {
	buf := ethtoolioctl.Request(unix.ETHTOOL_SRXFHINDIR, 8+4*len(t))
	ethtoolioctl.PutU32(buf, 4, uint32(len(t)))
	for i, q := range t {
		ethtoolioctl.PutU32(buf, 8+4*i, q)
	}
	if err := ethtoolCall(iface, buf); err != nil {
		return fmt.Errorf("set RSS table: %w", err)
	}
	return nil
}
