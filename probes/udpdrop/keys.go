package udpdrop

import "github.com/perfscope/perfscope/probes"

// MarshalText is a PortKey's text form (probes.MarshalKey), so a Snapshot
// encodes as JSON.
func (k PortKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.Port), int64(k.Family), int64(k.Kind), int64(k.Reason)), nil
}

// UnmarshalText reads MarshalText's form.
func (k *PortKey) UnmarshalText(b []byte) error {
	var port, family, kind, reason int64
	err := probes.UnmarshalKey(b, &port, &family, &kind, &reason)
	*k = PortKey{Port: uint16(port), Family: uint16(family), Kind: Kind(kind), Reason: uint32(reason)}
	return err
}
