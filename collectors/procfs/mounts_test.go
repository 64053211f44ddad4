package procfs

import (
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	in := `77 50 0:40 / / ro,relatime - overlay overlay rw,lowerdir=/a
54 78 0:43 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw
78 77 0:43 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
92 79 0:22 /kernel/btf /sys/kernel/btf rw,relatime shared:5 master:1 - sysfs sysfs ro
93 77 254:0 /srv/my\040dir /results rw,relatime - ext4 /dev/vda rw
`
	ms, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 || !ms[0].ReadOnly || ms[2].ReadOnly || ms[4].Root != "/srv/my dir" || ms[3].FSType != "sysfs" {
		t.Fatalf("%+v", ms)
	}
	if !ms[3].ReadOnly {
		t.Error("a read-only superblock makes the mount read-only")
	}
	for path, want := range map[string]string{"/proc/sys/net/core/rmem_max": "/proc/sys", "/proc/irq/1": "/proc", "/usr/bin": "/", "/results/x": "/results"} {
		if m, ok := MountAt(ms, path); !ok || m.MountPoint != want {
			t.Errorf("MountAt(%s) = %+v, want %s", path, m, want)
		}
	}
	if _, err := parseMountinfo(strings.NewReader("1 2 3\n")); err == nil {
		t.Error("a short line is malformed")
	}
}
