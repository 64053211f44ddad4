// Package procfs reads the kernel counters and settings perfscope needs from
// /proc and /sys. Every path goes through FS, whose root is "/" on a live
// system and a fixture directory in tests; parsing is split from opening so
// that each parser is tested on recorded files.
package procfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FS reads files below Root.
type FS struct {
	Root string
}

// Default reads the live system.
var Default = FS{Root: "/"}

// Path joins p (absolute, e.g. "/proc/softirqs") onto the root.
func (fs FS) Path(p string) string {
	return filepath.Join(fs.Root, p)
}

// Open opens a file below the root.
func (fs FS) Open(p string) (*os.File, error) {
	return os.Open(fs.Path(p))
}

// ReadString reads a small file and trims the trailing newline.
func (fs FS) ReadString(p string) (string, error) {
	b, err := os.ReadFile(fs.Path(p))
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// ReadInt reads a file holding one integer (a sysctl, a sysfs attribute).
func (fs FS) ReadInt(p string) (int64, error) {
	s, err := fs.ReadString(p)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// Sysctl reads a sysctl by dotted name ("net.core.rmem_max") or, as
// sysctl(8) also accepts, by slash-separated path
// ("net/ipv4/conf/eth0.100/rp_filter"): a name with a slash is taken as
// a path, so interface names with dots (VLANs) keep them. Absent sysctls
// return an error wrapping os.ErrNotExist.
func (fs FS) Sysctl(name string) (string, error) {
	path := name
	if !strings.Contains(name, "/") {
		path = strings.ReplaceAll(name, ".", "/")
	}
	s, err := fs.ReadString("/proc/sys/" + path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// InterfaceSysctl is the Sysctl name of a per-interface setting, e.g.
// InterfaceSysctl("ipv4", "eth0.100", "rp_filter") =
// "net/ipv4/conf/eth0.100/rp_filter": a path, so the dot in a VLAN's name
// is not read as a separator.
func InterfaceSysctl(family, iface, key string) string {
	return "net/" + family + "/conf/" + iface + "/" + key
}

// SysctlInt reads an integer sysctl; ok is false when it does not exist.
func (fs FS) SysctlInt(name string) (v int64, ok bool, err error) {
	s, err := fs.Sysctl(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err = strconv.ParseInt(strings.Fields(s)[0], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("sysctl %s=%q: %w", name, s, err)
	}
	return v, true, nil
}

// SysctlInts reads a sysctl holding several integers on one line
// ("net.ipv4.tcp_rmem" = "4096 131072 6291456"); ok is false when it does
// not exist.
func (fs FS) SysctlInts(name string) (v []int64, ok bool, err error) {
	s, err := fs.Sysctl(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, w := range strings.Fields(s) {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return nil, false, fmt.Errorf("sysctl %s=%q: %w", name, s, err)
		}
		v = append(v, n)
	}
	return v, true, nil
}
