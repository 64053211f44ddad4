package netconfig

import (
	"github.com/perfscope/perfscope/base/auditnetlink"
)

// AuditStatus is the part of struct audit_status the diagnosis reads
// (Enabled: 0 off, 1 on, 2 on and locked until reboot; PID: the registered
// audit daemon, 0 when none).
type AuditStatus = auditnetlink.Status

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

// audit reads the kernel's audit status; auditdRunning is what the
// snapshot's scan of the processes found.
func (s Sources) audit(c *NetConfig, auditdRunning bool) Audit {
	var a Audit
	a.AuditdRunning = auditdRunning
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

// auditStatusNetlink sends AUDIT_GET over NETLINK_AUDIT. It needs
// CAP_AUDIT_CONTROL; without it the kernel answers EPERM.
func auditStatusNetlink() (AuditStatus, error) { return auditnetlink.Get() }
