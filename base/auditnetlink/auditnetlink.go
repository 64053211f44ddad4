// Package auditnetlink is the kernel audit status over NETLINK_AUDIT
// (AUDIT_GET, AUDIT_SET of "enabled"), shared by the reader
// (collectors/netconfig) and the executor of typed changes
// (apply) so that the exchange and the struct audit_status
// layout exist once. Both need CAP_AUDIT_CONTROL; without it the kernel
// answers EPERM.
package auditnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Message types of linux/audit.h.
const (
	auditGet = 1000 // AUDIT_GET
	auditSet = 1001 // AUDIT_SET
)

// Status is the part of struct audit_status perfscope reads.
type Status struct {
	// Enabled is 0 (off), 1 (on) or 2 (on and locked until reboot).
	Enabled uint32 `json:"enabled"`
	// PID is the registered audit daemon, 0 when none.
	PID uint32 `json:"pid"`
}

// Get reads the audit status (AUDIT_GET).
func Get() (Status, error) {
	data, err := exchange(auditGet, nil)
	if err != nil {
		return Status{}, fmt.Errorf("AUDIT_GET: %w", err)
	}
	return parseStatus(data)
}

// SetEnabled sets only the "enabled" flag (AUDIT_SET with mask
// AUDIT_STATUS_ENABLED).
func SetEnabled(v uint32) error {
	payload := make([]byte, 32)
	binary.NativeEndian.PutUint32(payload[0:], unix.AUDIT_STATUS_ENABLED)
	binary.NativeEndian.PutUint32(payload[4:], v)
	if _, err := exchange(auditSet, payload); err != nil {
		return fmt.Errorf("AUDIT_SET enabled=%d: %w", v, err)
	}
	return nil
}

// parseStatus reads struct audit_status: mask, enabled, failure, pid, ...
func parseStatus(data []byte) (Status, error) {
	if len(data) < 16 {
		return Status{}, fmt.Errorf("AUDIT_GET: status of %d bytes", len(data))
	}
	return Status{Enabled: binary.NativeEndian.Uint32(data[4:]), PID: binary.NativeEndian.Uint32(data[12:])}, nil
}

// exchange sends one audit message and returns the status the kernel
// sends back for AUDIT_GET, after its ACK or error (in either order).
func exchange(typ uint16, payload []byte) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("audit netlink socket (kernel without CONFIG_AUDIT?): %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, err
	}
	req := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], typ)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(req[8:], 1)
	copy(req[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, 8192)
	var r reply
	for range 4 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if err := r.add(m.Header.Type, m.Data); err != nil {
				return nil, err
			}
		}
		if r.complete(typ) {
			return r.status, nil
		}
	}
	return nil, errors.New("no reply from the kernel")
}

// reply gathers the messages answering one request.
type reply struct {
	acked  bool
	status []byte
}

// add takes one message: an error ends the exchange, an ACK or the status
// is kept.
func (r *reply) add(typ uint16, data []byte) error {
	switch typ {
	case unix.NLMSG_ERROR:
		if len(data) < 4 {
			return errors.New("short netlink error")
		}
		if errno := -int32(binary.NativeEndian.Uint32(data)); errno != 0 {
			return syscall.Errno(errno)
		}
		r.acked = true
	case auditGet:
		r.status = slices.Clone(data)
	}
	return nil
}

// complete: the ACK came, and for AUDIT_GET the status too.
func (r *reply) complete(typ uint16) bool {
	return r.acked && (typ != auditGet || r.status != nil)
}
