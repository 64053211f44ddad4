package netconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/procfs"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The device-wide sysfs values, each instance's own from netlink, and a
// threaded instance's kernel thread placed from /proc (its command holds a
// space and a parenthesis, as kernel thread names may).
func TestNAPISection(t *testing.T) {
	root := t.TempDir()
	stat := "812 (napi/eth0-8 (x)) S 2 0 0 0 -1 2129984 0 0 0 0 0 41 0 0 20 0 1 0 400 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	writeTree(t, root, map[string]string{
		"sys/class/net/eth0/napi_defer_hard_irqs": "2\n",
		"sys/class/net/eth0/gro_flush_timeout":    "200000\n",
		"sys/class/net/eth0/threaded":             "1\n",
		"proc/812/status":                         "Name:\tnapi/eth0-8\nCpus_allowed_list:\t2-3\n",
		"proc/812/stat":                           stat,
	})
	two, flush := uint32(2), uint64(200000)
	s := Sources{FS: procfs.FS{Root: root}, NAPIs: func(ifindex int) ([]netlinkq.NAPI, error) {
		if ifindex != 4 {
			return nil, fmt.Errorf("asked for ifindex %d", ifindex)
		}
		return []netlinkq.NAPI{
			{Ifindex: 4, ID: 8, IRQ: 40, PID: 812, DeferHardIRQs: &two, GROFlushTimeoutNs: &flush, Threaded: "enabled"},
			{Ifindex: 4, ID: 9, IRQ: 41},
		}, nil
	}}
	n := s.napi("eth0", 4)
	if n.DeferHardIRQs == nil || *n.DeferHardIRQs != 2 || n.GROFlushTimeoutNs == nil || *n.GROFlushTimeoutNs != 200000 || n.Threaded == nil || *n.Threaded != 1 {
		t.Errorf("device values %+v", n)
	}
	if n.Unavailable != "" || len(n.Instances) != 2 {
		t.Fatalf("instances %+v (%s)", n.Instances, n.Unavailable)
	}
	th := n.Instances[0]
	if th.ThreadCPUs != "2-3" || th.ThreadLastCPU == nil || *th.ThreadLastCPU != 3 {
		t.Errorf("thread placement %q %v", th.ThreadCPUs, th.ThreadLastCPU)
	}
	if n.Instances[1].ThreadCPUs != "" || n.Instances[1].ThreadLastCPU != nil {
		t.Errorf("an unthreaded instance has a thread: %+v", n.Instances[1])
	}
}

// Without the sysfs files (before 5.10) the values are unknown, not 0; an
// old kernel's netlink says why the instances are missing.
func TestNAPISectionDegrades(t *testing.T) {
	s := Sources{FS: procfs.FS{Root: t.TempDir()}, NAPIs: func(int) ([]netlinkq.NAPI, error) {
		return nil, fmt.Errorf("netdev command 11: %w", netlinkq.ErrUnavailable)
	}}
	n := s.napi("eth0", 4)
	if n.DeferHardIRQs != nil || n.GROFlushTimeoutNs != nil || n.Threaded != nil {
		t.Errorf("absent files read as %+v", n)
	}
	if n.Unavailable == "" || len(n.Instances) != 0 {
		t.Errorf("unavailable %q instances %v", n.Unavailable, n.Instances)
	}
	n = Sources{FS: procfs.FS{Root: t.TempDir()}, NAPIs: func(int) ([]netlinkq.NAPI, error) { return nil, errors.New("boom") }}.napi("eth0", 4)
	if n.Unavailable != "netdev netlink napi-get: boom" {
		t.Errorf("unavailable %q", n.Unavailable)
	}
}
