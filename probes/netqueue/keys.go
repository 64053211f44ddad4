package netqueue

import "github.com/perfscope/perfscope/probes"

// Text forms of the snapshot's keys (probes.MarshalKey), so a Snapshot
// encodes as JSON.

func (k NAPIKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.ID), int64(k.Ifindex)), nil
}

func (k *NAPIKey) UnmarshalText(b []byte) error {
	var id, ifindex int64
	err := probes.UnmarshalKey(b, &id, &ifindex)
	*k = NAPIKey{ID: uint32(id), Ifindex: int(ifindex)}
	return err
}

func (k QueueKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.Ifindex), int64(k.Queue)), nil
}

func (k *QueueKey) UnmarshalText(b []byte) error {
	var ifindex, queue int64
	err := probes.UnmarshalKey(b, &ifindex, &queue)
	*k = QueueKey{Ifindex: int(ifindex), Queue: int(queue)}
	return err
}

func (k NAPIQueueKey) MarshalText() ([]byte, error) {
	return probes.MarshalKey(int64(k.NAPIID), int64(k.Ifindex), int64(k.RawQueue)), nil
}

func (k *NAPIQueueKey) UnmarshalText(b []byte) error {
	var id, ifindex, raw int64
	err := probes.UnmarshalKey(b, &id, &ifindex, &raw)
	*k = NAPIQueueKey{NAPIID: uint32(id), Ifindex: int(ifindex), RawQueue: int(raw)}
	return err
}
