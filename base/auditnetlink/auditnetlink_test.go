package auditnetlink

import (
	"errors"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
)

func TestReplyHandling(t *testing.T) {
	status := make([]byte, 40)
	status[4], status[12] = 1, 77
	var r reply
	// The status may come before the ACK: not complete until both.
	if err := r.add(auditGet, status); err != nil || r.complete(auditGet) {
		t.Fatalf("status alone: %v %v", err, r.complete(auditGet))
	}
	if err := r.add(unix.NLMSG_ERROR, make([]byte, 4)); err != nil || !r.complete(auditGet) {
		t.Fatalf("ack: %v %v", err, r.complete(auditGet))
	}
	st, err := parseStatus(r.status)
	if err != nil || st.Enabled != 1 || st.PID != 77 {
		t.Errorf("status = %+v %v", st, err)
	}
	// AUDIT_SET is complete on its ACK alone.
	var set reply
	if err := set.add(unix.NLMSG_ERROR, make([]byte, 4)); err != nil || !set.complete(auditSet) {
		t.Errorf("set ack: %v", err)
	}
	eperm := []byte{0xff, 0xff, 0xff, 0xff} // -1 = EPERM
	if err := new(reply).add(unix.NLMSG_ERROR, eperm); !errors.Is(err, syscall.EPERM) {
		t.Errorf("eperm: %v", err)
	}
	if err := new(reply).add(unix.NLMSG_ERROR, []byte{1}); err == nil {
		t.Error("short error accepted")
	}
	if _, err := parseStatus(make([]byte, 8)); err == nil {
		t.Error("short status accepted")
	}
}

// TestGetLive asks this kernel: root may read the status.
func TestGetLive(t *testing.T) {
	testutil.RequireRoot(t)
	st, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled > 2 {
		t.Errorf("enabled = %d", st.Enabled)
	}
}
