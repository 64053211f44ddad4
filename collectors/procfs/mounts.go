package procfs

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Mount is one line of /proc/self/mountinfo: what perfscope asks of its
// own mounts in a container (is /sys/kernel/btf there, is the root
// filesystem read-only, can /proc/sys be written).
type Mount struct {
	// Root is the mounted directory inside its filesystem (a bind
	// mount's source); MountPoint is where it appears here.
	Root, MountPoint string
	FSType, Source   string
	// ReadOnly: the mount itself or its superblock is read-only.
	ReadOnly bool
}

// Mounts reads /proc/self/mountinfo.
func (fs FS) Mounts() ([]Mount, error) {
	f, err := fs.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads proc(5)'s format: "36 35 98:0 /mnt1 /mnt2
// rw,noatime master:1 - ext3 /dev/root rw,errors=continue", whose optional
// fields end at the "-" separator; paths escape space, tab, newline and
// backslash as octal.
func parseMountinfo(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+3 > len(f) {
			return nil, fmt.Errorf("mountinfo line %d: malformed: %q", n, sc.Text())
		}
		m := Mount{Root: unescapeMount(f[3]), MountPoint: unescapeMount(f[4]), FSType: f[sep+1], Source: unescapeMount(f[sep+2])}
		m.ReadOnly = hasOption(f[5], "ro") || (sep+3 < len(f) && hasOption(f[sep+3], "ro"))
		out = append(out, m)
	}
	return out, sc.Err()
}

func hasOption(opts, o string) bool {
	for _, x := range strings.Split(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// MountAt is the mount that holds path: the last mounted one whose mount
// point is path or a parent of it (later mounts hide earlier ones).
func MountAt(mounts []Mount, path string) (Mount, bool) {
	var best Mount
	found := false
	for _, m := range mounts {
		mp := strings.TrimSuffix(m.MountPoint, "/")
		if path == m.MountPoint || path == mp || strings.HasPrefix(path, mp+"/") {
			if !found || len(m.MountPoint) >= len(best.MountPoint) {
				best, found = m, true
			}
		}
	}
	return best, found
}
