package netlinkq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// cmdNAPISet is NETDEV_CMD_NAPI_SET (Linux 6.13+): one NAPI instance's
// settings, where sysfs sets a whole device's.
const cmdNAPISet = 14

// NAPISettings are the per-instance settings napi-set writes; nil fields
// are left as they are. IRQSuspendTimeoutNs needs Linux 6.13, Threaded
// (0 disabled, 1 enabled, 2 busy-poll) 6.17.
type NAPISettings struct {
	DeferHardIRQs       *uint32
	GROFlushTimeoutNs   *uint64
	IRQSuspendTimeoutNs *uint64
	Threaded            *uint32
}

func u64Attr(t uint16, v uint64) []byte {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return attr(t, b[:])
}

// SetNAPI writes the settings of NAPI instance id (in the caller's network
// namespace) through the netdev family's napi-set, as
// `ynl --do napi-set --json '{"id": N, "defer-hard-irqs": …}'` does. A
// kernel without napi-set gives ErrUnavailable; an unknown id an error
// wrapping os.ErrNotExist.
func SetNAPI(id uint32, s NAPISettings) error {
	body := u32Attr(attrNAPIID, id)
	if s.DeferHardIRQs != nil {
		body = append(body, u32Attr(attrNAPIDeferHardIRQs, *s.DeferHardIRQs)...)
	}
	if s.GROFlushTimeoutNs != nil {
		body = append(body, u64Attr(attrNAPIGROFlushTimeout, *s.GROFlushTimeoutNs)...)
	}
	if s.IRQSuspendTimeoutNs != nil {
		body = append(body, u64Attr(attrNAPIIRQSuspendTimeout, *s.IRQSuspendTimeoutNs)...)
	}
	if s.Threaded != nil {
		body = append(body, u32Attr(attrNAPIThreaded, *s.Threaded)...)
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.close()
	family, err := c.familyID(cmdNAPISet)
	if err != nil {
		return err
	}
	_, err = c.roundTrip(family, unix.NLM_F_ACK, cmdNAPISet, body)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("napi-set: no NAPI instance %d in this network namespace: %w", id, os.ErrNotExist)
	case errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("napi-set: %w (%w)", ErrUnavailable, err)
	}
	return fmt.Errorf("napi-set of NAPI instance %d: %w", id, err)
}
