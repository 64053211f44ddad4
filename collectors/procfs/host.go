package procfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Capability numbers from include/uapi/linux/capability.h.
const (
	CapNetAdmin    = 12
	CapSysPtrace   = 19
	CapSysAdmin    = 21
	CapSysResource = 24
	CapSyslog      = 34
	CapPerfmon     = 38
	CapBPF         = 39
)

// CapNames names the capabilities perfscope cares about.
var CapNames = map[int]string{
	CapNetAdmin: "CAP_NET_ADMIN", CapSysPtrace: "CAP_SYS_PTRACE", CapSysAdmin: "CAP_SYS_ADMIN",
	CapSysResource: "CAP_SYS_RESOURCE", CapSyslog: "CAP_SYSLOG", CapPerfmon: "CAP_PERFMON", CapBPF: "CAP_BPF",
}

// ProcStatus is the part of /proc/PID/status perfscope reads.
type ProcStatus struct {
	Name string
	// State is the state letter: R, S, D, T, t, X, Z (zombie), ...
	State string
	// UID and GID are the real, effective, saved and filesystem ids.
	UID, GID [4]int
	// CapEff is the effective capability set.
	CapEff uint64
	// SigCgt is the set of caught signals (bit n-1 for signal n).
	SigCgt uint64
	// NStgid lists the thread group id in each pid namespace, outermost
	// first; the last is the id the process sees for itself.
	NStgid            []int
	Threads           int
	CpusAllowedList   string
	HasSigCgt, HasCap bool
	// Seccomp is the seccomp mode: 0 off, 1 strict, 2 filter (a
	// container runtime's profile); -1 when the kernel does not say.
	Seccomp int
	// NoNewPrivs is set by allowPrivilegeEscalation: false.
	NoNewPrivs bool
}

// HasCap reports whether capability c is effective.
func (s ProcStatus) Capable(c int) bool { return s.CapEff&(1<<uint(c)) != 0 }

// Catches reports whether signal sig has a handler installed.
func (s ProcStatus) Catches(sig int) bool { return sig > 0 && s.SigCgt&(1<<uint(sig-1)) != 0 }

// Status reads /proc/PID/status ("self" for pid 0).
func (fs FS) Status(pid int) (ProcStatus, error) {
	p := "/proc/self/status"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := fs.Open(p)
	if err != nil {
		return ProcStatus{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

func parseStatus(r io.Reader) (ProcStatus, error) {
	s := ProcStatus{Seccomp: -1}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "Name":
			s.Name = v
		case "State":
			s.State, _, _ = strings.Cut(v, " ")
		case "Uid", "Gid":
			f := strings.Fields(v)
			dst := &s.UID
			if k == "Gid" {
				dst = &s.GID
			}
			for i := 0; i < len(f) && i < 4; i++ {
				if dst[i], err = strconv.Atoi(f[i]); err != nil {
					return s, fmt.Errorf("status %s: %w", k, err)
				}
			}
		case "CapEff":
			s.CapEff, err = strconv.ParseUint(v, 16, 64)
			s.HasCap = err == nil
		case "SigCgt":
			s.SigCgt, err = strconv.ParseUint(v, 16, 64)
			s.HasSigCgt = err == nil
		case "NStgid":
			for _, f := range strings.Fields(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return s, fmt.Errorf("status NStgid: %w", err)
				}
				s.NStgid = append(s.NStgid, n)
			}
		case "Threads":
			s.Threads, err = strconv.Atoi(v)
		case "Cpus_allowed_list":
			s.CpusAllowedList = v
		case "Seccomp":
			s.Seccomp, err = strconv.Atoi(v)
		case "NoNewPrivs":
			s.NoNewPrivs = v == "1"
		}
		if err != nil {
			return s, fmt.Errorf("status %s=%q: %w", k, v, err)
		}
	}
	return s, sc.Err()
}

// Lockdown is the kernel lockdown mode ("none", "integrity",
// "confidentiality"); ok is false when the LSM is absent. securityfs is
// often not mounted (containers, minimal VMs): on the live system Lockdown
// then mounts a private instance in a temporary directory, reads it and
// unmounts it again, leaving the system as it was.
func (fs FS) Lockdown() (mode string, ok bool) {
	s, err := fs.ReadString("/sys/kernel/security/lockdown")
	if err == nil {
		return parseLockdown(s), true
	}
	if fs.Root != "/" {
		return "", false
	}
	dir, err := os.MkdirTemp("", "perfscope-securityfs-")
	if err != nil {
		return "", false
	}
	defer os.Remove(dir)
	if err := unix.Mount("securityfs", dir, "securityfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return "", false
	}
	defer unix.Unmount(dir, 0)
	b, err := os.ReadFile(dir + "/lockdown")
	if err != nil {
		return "", false
	}
	return parseLockdown(string(b)), true
}

// parseLockdown picks the bracketed mode from "none [integrity] confidentiality".
func parseLockdown(s string) string {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return strings.TrimSpace(s)
}

// KallsymsReadable reports whether /proc/kallsyms shows real addresses to
// this process (kptr_restrict and CAP_SYSLOG decide; zeros mean hidden).
func (fs FS) KallsymsReadable() (bool, error) {
	f, err := fs.Open("/proc/kallsyms")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; i < 64 && sc.Scan(); i++ {
		addr, _, _ := strings.Cut(sc.Text(), " ")
		if strings.Trim(addr, "0") != "" {
			return true, nil
		}
	}
	return false, sc.Err()
}
