package netconfig

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// AuditStatus is the part of struct audit_status the diagnosis reads.
type AuditStatus struct {
	// Enabled is 0 (off), 1 (on) or 2 (on and locked until reboot).
	Enabled uint32 `json:"enabled"`
	// PID is the registered audit daemon, 0 when none.
	PID uint32 `json:"pid"`
}

// Audit is whether the kernel audits syscalls (Makita (LinuxCon Japan 2016): "disable auditd"
// removed audit_* from the per-packet path).
type Audit struct {
	// Enabled is nil when the status could not be read (no
	// CAP_AUDIT_CONTROL, kernel without CONFIG_AUDIT; reason in
	// Unavailable["audit"]).
	Enabled *uint32 `json:"enabled"`
	// DaemonPID is the kernel's registered auditd, when Enabled is known.
	DaemonPID     uint32 `json:"daemon_pid"`
	AuditdRunning bool   `json:"auditd_running"`
}

func (s Sources) audit(c *NetConfig) Audit {
	var a Audit
	a.AuditdRunning = s.processRunning("auditd")
	if s.Audit == nil {
		c.Unavailable["audit"] = "audit status not requested"
		return a
	}
	st, err := s.Audit()
	if err != nil {
		c.Unavailable["audit"] = err.Error()
		return a
	}
	a.Enabled, a.DaemonPID = &st.Enabled, st.PID
	return a
}

// processRunning scans /proc/*/comm, bounded like the other process scans.
func (s Sources) processRunning(comm string) bool {
	entries, err := os.ReadDir(s.FS.Path("/proc"))
	if err != nil {
		return false
	}
	scanned := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if scanned++; scanned > 8192 {
			return false
		}
		if c, err := s.FS.ReadString("/proc/" + e.Name() + "/comm"); err == nil && strings.TrimSpace(c) == comm {
			return true
		}
	}
	return false
}

// auditGet is AUDIT_GET from linux/audit.h.
const auditGet = 1000

// auditStatusNetlink sends AUDIT_GET over NETLINK_AUDIT. It needs
// CAP_AUDIT_CONTROL; without it the kernel answers EPERM.
func auditStatusNetlink() (AuditStatus, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return AuditStatus{}, fmt.Errorf("audit netlink socket (kernel without CONFIG_AUDIT?): %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return AuditStatus{}, err
	}
	req := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(req[8:], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return AuditStatus{}, fmt.Errorf("AUDIT_GET: %w", err)
	}
	buf := make([]byte, 8192)
	// The kernel sends an ACK (or an error) and the status, in either order.
	for range 4 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return AuditStatus{}, fmt.Errorf("AUDIT_GET reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return AuditStatus{}, fmt.Errorf("AUDIT_GET reply: %w", err)
		}
		for _, m := range msgs {
			st, done, err := parseAuditReply(m.Header.Type, m.Data)
			if err != nil || done {
				return st, err
			}
		}
	}
	return AuditStatus{}, errors.New("AUDIT_GET: no status in reply")
}

// parseAuditReply handles one netlink message of the AUDIT_GET exchange:
// done is true when it carried the status or an error.
func parseAuditReply(typ uint16, data []byte) (AuditStatus, bool, error) {
	switch typ {
	case unix.NLMSG_ERROR:
		if len(data) < 4 {
			return AuditStatus{}, true, errors.New("AUDIT_GET: short error")
		}
		if errno := -int32(binary.NativeEndian.Uint32(data)); errno != 0 {
			return AuditStatus{}, true, fmt.Errorf("AUDIT_GET: %w", syscall.Errno(errno))
		}
		return AuditStatus{}, false, nil // the ACK
	case auditGet:
		// struct audit_status: mask, enabled, failure, pid, ...
		if len(data) < 16 {
			return AuditStatus{}, true, fmt.Errorf("AUDIT_GET: status of %d bytes", len(data))
		}
		return AuditStatus{Enabled: binary.NativeEndian.Uint32(data[4:]), PID: binary.NativeEndian.Uint32(data[12:])}, true, nil
	}
	return AuditStatus{}, false, nil
}
