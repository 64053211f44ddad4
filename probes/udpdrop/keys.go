package udpdrop

import (
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// MarshalText is a PortKey's text form (probes.MarshalKey), so a Snapshot
// encodes as JSON.
func (k PortKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.Port), int64(k.Family), int64(k.Kind), int64(k.Reason), int64(k.Proto)), nil
}

// UnmarshalText reads MarshalText's form, and the four-field form of
// recordings made before TCP drops were counted (all UDP).
func (k *PortKey) UnmarshalText(b []byte) error {
	var port, family, kind, reason int64
	proto := int64(unix.IPPROTO_UDP)
	err := probes.UnmarshalKey(b, &port, &family, &kind, &reason, &proto)
	if err != nil && probes.UnmarshalKey(b, &port, &family, &kind, &reason) == nil {
		err = nil
	}
	*k = PortKey{Port: uint16(port), Family: uint16(family), Kind: Kind(kind), Reason: uint32(reason), Proto: uint32(proto)}
	return err
}
