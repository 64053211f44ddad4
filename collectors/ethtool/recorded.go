package ethtool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Recorded replays ethtool's text output captured on a real host, so that
// tests (here and in the commands and rules that consume this package) run
// against real NIC layouts without the NIC. Dir/IFACE/ holds the outputs of
// `ethtool -i`, `-S`, `-l`, `-k` and `-x` as i.txt, S.txt, l.txt, k.txt and
// x.txt; a missing file, or ethtool's "Operation not supported", is
// ErrNotSupported.
type Recorded struct{ Dir string }

var _ Source = Recorded{}

func (r Recorded) open(iface, flag string) (*os.File, error) {
	if _, err := os.Stat(filepath.Join(r.Dir, iface)); err != nil {
		return nil, fmt.Errorf("%s: %w", iface, ErrNoDevice)
	}
	f, err := os.Open(filepath.Join(r.Dir, iface, flag+".txt"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ethtool -%s %s: %w", flag, iface, ErrNotSupported)
	}
	return f, err
}

func replay[T any](r Recorded, iface, flag string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := r.open(iface, flag)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return zero, fmt.Errorf("ethtool -%s %s: %w", flag, iface, err)
	}
	return v, nil
}

// DriverInfo implements Source.
func (r Recorded) DriverInfo(iface string) (DriverInfo, error) {
	return replay(r, iface, "i", ParseDriverInfo)
}

// Stats implements Source.
func (r Recorded) Stats(iface string) ([]Stat, error) { return replay(r, iface, "S", ParseStats) }

// Channels implements Source.
func (r Recorded) Channels(iface string) (Channels, error) {
	return replay(r, iface, "l", ParseChannels)
}

// Features implements Source.
func (r Recorded) Features(iface string) (Features, error) {
	return replay(r, iface, "k", ParseFeatures)
}

// RSS implements Source.
func (r Recorded) RSS(iface string) (RSS, error) { return replay(r, iface, "x", ParseRSS) }

// lines reads r, failing with ErrNotSupported when ethtool printed that the
// request is not supported.
func lines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "Operation not supported") || strings.HasPrefix(line, "no stats available") {
			return nil, ErrNotSupported
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

// ParseDriverInfo parses `ethtool -i`.
func ParseDriverInfo(r io.Reader) (DriverInfo, error) {
	ls, err := lines(r)
	if err != nil {
		return DriverInfo{}, err
	}
	var d DriverInfo
	for _, l := range ls {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "driver":
			d.Driver = v
		case "version":
			d.Version = v
		case "firmware-version":
			d.FirmwareVersion = v
		case "bus-info":
			d.BusInfo = v
		}
	}
	if d.Driver == "" {
		return d, fmt.Errorf("no driver line")
	}
	return d, nil
}

// ParseStats parses `ethtool -S`. Names may contain ": " (bnxt's
// "[0]: rx_ucast_packets"), so the value is after the last one.
func ParseStats(r io.Reader) ([]Stat, error) {
	ls, err := lines(r)
	if err != nil {
		return nil, err
	}
	var out []Stat
	for _, l := range ls {
		l = strings.TrimSpace(l)
		if l == "" || l == "NIC statistics:" {
			continue
		}
		i := strings.LastIndex(l, ":")
		if i < 0 {
			return nil, fmt.Errorf("statistic line %q has no value", l)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(l[i+1:]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("statistic %q: %w", l[:i], err)
		}
		out = append(out, Stat{Name: strings.TrimSpace(l[:i]), Value: v})
	}
	return out, nil
}

// ParseChannels parses `ethtool -l`.
func ParseChannels(r io.Reader) (Channels, error) {
	ls, err := lines(r)
	if err != nil {
		return Channels{}, err
	}
	var c Channels
	section := 0 // 1: maximums, 2: current
	for _, l := range ls {
		switch {
		case strings.HasPrefix(l, "Pre-set maximums"):
			section = 1
			continue
		case strings.HasPrefix(l, "Current hardware settings"):
			section = 2
			continue
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || section == 0 {
			continue
		}
		var n uint64
		if v = strings.TrimSpace(v); v != "n/a" {
			if n, err = strconv.ParseUint(v, 10, 32); err != nil {
				return c, fmt.Errorf("channels %s: %q", k, v)
			}
		}
		fields := map[string][2]*uint32{
			"RX": {&c.MaxRX, &c.RX}, "TX": {&c.MaxTX, &c.TX}, "Other": {&c.MaxOther, &c.Other}, "Combined": {&c.MaxCombined, &c.Combined},
		}
		if f, ok := fields[strings.TrimSpace(k)]; ok {
			*f[section-1] = uint32(n)
		}
	}
	if section != 2 {
		return c, fmt.Errorf("no current settings")
	}
	return c, nil
}

// legacyFeatureNames maps the names `ethtool -k` prints for historical
// reasons to the kernel's ETH_SS_FEATURES names that Ioctl reports.
var legacyFeatureNames = map[string]string{
	"rx-checksumming":              "rx-checksum",
	"scatter-gather":               "tx-scatter-gather",
	"tcp-segmentation-offload":     FeatureTSO,
	"generic-segmentation-offload": FeatureGSO,
	"generic-receive-offload":      FeatureGRO,
	"large-receive-offload":        FeatureLRO,
	"rx-vlan-offload":              "rx-vlan-hw-parse",
	"tx-vlan-offload":              "tx-vlan-hw-insert",
	"ntuple-filters":               "rx-ntuple-filter",
	"receive-hashing":              "rx-hashing",
}

// ParseFeatures parses `ethtool -k`. Group headers that ethtool synthesises
// (tx-checksumming) are kept under their printed names.
func ParseFeatures(r io.Reader) (Features, error) {
	ls, err := lines(r)
	if err != nil {
		return nil, err
	}
	var out Features
	for _, l := range ls {
		if strings.HasPrefix(l, "Features for") || strings.TrimSpace(l) == "" {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			return nil, fmt.Errorf("feature line %q", l)
		}
		v = strings.TrimSpace(v)
		f := Feature{Name: k, Fixed: strings.Contains(v, "[fixed]")}
		if n, ok := legacyFeatureNames[k]; ok {
			f.Name = n
		}
		switch {
		case strings.HasPrefix(v, "on"):
			f.Active = true
		case strings.HasPrefix(v, "off"):
		default:
			return nil, fmt.Errorf("feature %s: state %q", k, v)
		}
		f.Requested = f.Active
		if strings.Contains(v, "[requested on]") {
			f.Requested = true
		} else if strings.Contains(v, "[requested off]") {
			f.Requested = false
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseRSS parses `ethtool -x`.
func ParseRSS(r io.Reader) (RSS, error) {
	ls, err := lines(r)
	if err != nil {
		return RSS{}, err
	}
	var rss RSS
	section := ""
	for _, l := range ls {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "RX flow hash indirection table"):
			section = "indir"
			if i := strings.Index(t, " with "); i >= 0 {
				fmt.Sscanf(t[i:], " with %d RX ring", &rss.RXRings)
			}
			continue
		case strings.HasPrefix(t, "RSS hash key"):
			section = "key"
			continue
		case strings.HasPrefix(t, "RSS hash function"):
			section = "hfunc"
			continue
		case t == "":
			continue
		}
		switch section {
		case "indir":
			_, values, ok := strings.Cut(t, ":")
			if !ok {
				return rss, fmt.Errorf("indirection line %q", t)
			}
			for _, f := range strings.Fields(values) {
				q, err := strconv.ParseUint(f, 10, 32)
				if err != nil {
					return rss, fmt.Errorf("indirection entry %q", f)
				}
				rss.Indirection = append(rss.Indirection, uint32(q))
			}
		case "key":
			if rss.Key, err = parseHexKey(t); err != nil {
				return rss, err
			}
		case "hfunc":
			if name, state, ok := strings.Cut(t, ":"); ok && strings.TrimSpace(state) == "on" {
				rss.HashFunction = name
			}
		}
	}
	if len(rss.Indirection) == 0 {
		return rss, fmt.Errorf("no indirection table: %w", ErrNotSupported)
	}
	return rss, nil
}

func parseHexKey(text string) (HexBytes, error) {
	if text == "" {
		return nil, nil
	}
	var out HexBytes
	for _, h := range strings.Split(text, ":") {
		b, err := strconv.ParseUint(h, 16, 8)
		if err != nil {
			return nil, fmt.Errorf("hash key byte %q", h)
		}
		out = append(out, byte(b))
	}
	return out, nil
}
