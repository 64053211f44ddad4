package lockstat

import "github.com/perfscope/perfscope/probes"

// MarshalText is a SiteKey's text form (probes.MarshalKey), so a Snapshot
// encodes as JSON.
func (k SiteKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.StackID), int64(k.Flags)), nil
}

// UnmarshalText reads MarshalText's form.
func (k *SiteKey) UnmarshalText(b []byte) error {
	var stack, flags int64
	err := probes.UnmarshalKey(b, &stack, &flags)
	*k = SiteKey{StackID: int32(stack), Flags: uint32(flags)}
	return err
}
