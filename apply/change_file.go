package apply

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
)

// Sysctls and sysfs/procfs files: written with one write(2) to the kernel
// file itself, never through sysctl(8) or a shell, and read back.

type sysctlHandler struct{ noGuard }

func sysctlPath(c diagnose.Change) string {
	return filepath.Join(append([]string{"/proc/sys"}, diagnose.SysctlSegments(c.Key)...)...)
}

func (sysctlHandler) read(s *System, c diagnose.Change) (state, error) {
	v, err := s.readKernelFile(sysctlPath(c))
	return state{value: strings.Join(strings.Fields(v), " ")}, err
}

func (sysctlHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	return s.writeKernelFile(sysctlPath(c), value)
}

func (sysctlHandler) same(c diagnose.Change, value string, _ *Saved, st state) bool {
	if diagnose.SysctlIsMask(c.Key) {
		return sameMask(value, st.value)
	}
	return strings.Join(strings.Fields(value), " ") == st.value
}

type sysfsHandler struct{ noGuard }

func (sysfsHandler) read(s *System, c diagnose.Change) (state, error) {
	v, err := s.readKernelFile(c.Path)
	return state{value: strings.TrimSpace(v)}, err
}

func (sysfsHandler) write(s *System, c diagnose.Change, value string, _ *Saved) error {
	return s.writeKernelFile(c.Path, value)
}

// same compares as the kernel means the values: cpumasks by their CPUs
// ("3" and "00000003" are one mask), counts as numbers.
func (sysfsHandler) same(c diagnose.Change, value string, _ *Saved, st state) bool {
	format, _, err := diagnose.SysfsFormat(c.Path)
	if err != nil {
		return false
	}
	switch format {
	case "cpumask":
		return sameMask(value, st.value)
	case "count":
		a, errA := strconv.ParseUint(value, 10, 64)
		b, errB := strconv.ParseUint(st.value, 10, 64)
		return errA == nil && errB == nil && a == b
	}
	return value == st.value
}

// sameMask compares two hex cpumasks by their CPUs.
func sameMask(a, b string) bool {
	x, errA := cpuset.ParseMask(a)
	y, errB := cpuset.ParseMask(b)
	return errA == nil && errB == nil && x.Equal(y)
}

// kernelFS says whether an open file lives on procfs or sysfs: perfscope
// writes nothing else, so a path that resolves elsewhere (a bind mount, a
// planted file) is refused.
func kernelFS(f *os.File) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Type != unix.PROC_SUPER_MAGIC && st.Type != unix.SYSFS_MAGIC {
		return fmt.Errorf("%s is not on procfs or sysfs", f.Name())
	}
	return nil
}

func (s *System) path(p string) string { return filepath.Join(s.Root, p) }

func (s *System) readKernelFile(p string) (string, error) {
	f, err := os.OpenFile(s.path(p), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	defer f.Close()
	if s.Live {
		if err := kernelFS(f); err != nil {
			return "", err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return string(b), nil
}

// writeKernelFile writes value in one write(2). No O_CREAT: a file that
// does not exist is an error, never created.
func (s *System) writeKernelFile(p, value string) error {
	f, err := os.OpenFile(s.path(p), os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if s.Live {
		if err := kernelFS(f); err != nil {
			f.Close()
			return err
		}
	} else if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	_, werr := f.Write([]byte(value + "\n"))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		if errors.Is(werr, unix.EINVAL) {
			return fmt.Errorf("write %s = %s: the kernel refused the value (%w)", p, value, werr)
		}
		return fmt.Errorf("write %s = %s: %w", p, value, werr)
	}
	return nil
}
