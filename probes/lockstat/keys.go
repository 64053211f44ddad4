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

// MarshalText gives SockWaitKey a text form (a recorded snapshot's map
// key): the lock's address as a signed integer (the bits kept), then the
// kind's flags as 0 or 1.
func (k SockWaitKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.Lock), boolKey(k.Kind.Softirq), boolKey(k.Kind.Owned), boolKey(k.Kind.ContextUnknown)), nil
}

// UnmarshalText reads MarshalText's form.
func (k *SockWaitKey) UnmarshalText(b []byte) error {
	var lock, softirq, owned, unknown int64
	err := probes.UnmarshalKey(b, &lock, &softirq, &owned, &unknown)
	*k = SockWaitKey{Lock: uint64(lock), Kind: SockWaitKind{Softirq: softirq != 0, Owned: owned != 0, ContextUnknown: unknown != 0}}
	return err
}

func boolKey(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
