package probes

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ReadPerCPUHash reads every entry of a per-CPU hash (or LRU per-CPU hash)
// map: key → one value per possible CPU, indexed by CPU number.
func ReadPerCPUHash[K comparable, V any](m *ebpf.Map) (map[K][]V, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	out := map[K][]V{}
	err = readHashBatches(m, cpus, func(k K, vs []V) { out[k] = append([]V(nil), vs...) })
	if err == nil {
		return out, nil
	}
	if !batchUnusable(err) {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	out = map[K][]V{}
	var key K
	var values []V
	it := m.Iterate()
	for it.Next(&key, &values) {
		out[key] = append([]V(nil), values...)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	return out, nil
}

// ReadHash reads every entry of a plain hash map.
func ReadHash[K comparable, V any](m *ebpf.Map) (map[K]V, error) {
	out := map[K]V{}
	err := readHashBatches(m, 1, func(k K, vs []V) { out[k] = vs[0] })
	if err == nil {
		return out, nil
	}
	if !batchUnusable(err) {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	out = map[K]V{}
	var key K
	var value V
	it := m.Iterate()
	for it.Next(&key, &value) {
		out[key] = value
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	return out, nil
}

// hashBatch is how many entries one batched read of a hash asks for.
const hashBatch = 1024

// readHashBatches reads every entry of a hash map hashBatch at a time,
// calling add with each key and its values (perCPU of them: one per
// possible CPU for a per-CPU map, else 1). Iterating takes two system
// calls an entry: reading a profile's thousand sampled stacks and counts
// that way took more system calls than the rest of a 4 s run. An error
// batchUnusable accepts means the map must be read entry by entry (what
// add was given so far is then incomplete).
func readHashBatches[K comparable, V any](m *ebpf.Map, perCPU int, add func(K, []V)) error {
	n := max(1, min(int(m.MaxEntries()), hashBatch))
	keys := make([]K, n)
	values := make([]V, n*perCPU)
	var cursor ebpf.MapBatchCursor
	for {
		got, err := m.BatchLookup(&cursor, keys, values, nil)
		for i := range min(got, n) {
			add(keys[i], values[i*perCPU:(i+1)*perCPU:(i+1)*perCPU])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // the end
		}
		if err != nil {
			return err
		}
	}
}

// batchUnusable says a batched read failed because the kernel cannot batch
// this map (before 5.6: no batch operations) or a bucket held more than a
// batch (ENOSPC), not because the map could not be read.
func batchUnusable(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL)
}

// SumPerCPUCounters reads slots 0..n-1 of a per-CPU array of u64 counters
// (the "lost" arrays of the probes) and sums each over CPUs.
func SumPerCPUCounters(m *ebpf.Map, n int) ([]uint64, error) {
	out := make([]uint64, n)
	for i := range n {
		var perCPU []uint64
		if err := m.Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("read map %s[%d]: %w", m, i, err)
		}
		for _, v := range perCPU {
			out[i] += v
		}
	}
	return out, nil
}

// SubPerCPU returns cur − prev per key and CPU, using sub for one value.
// Keys only in prev (entries the kernel evicted from an LRU map) are
// dropped: their activity since prev is unknown.
func SubPerCPU[K comparable, V any](cur, prev map[K][]V, sub func(a, b V) V) map[K][]V {
	out := make(map[K][]V, len(cur))
	for k, vs := range cur {
		d := append([]V(nil), vs...)
		if p, ok := prev[k]; ok {
			for cpu := range d {
				if cpu < len(p) {
					d[cpu] = sub(d[cpu], p[cpu])
				}
			}
		}
		out[k] = d
	}
	return out
}

// ReadPerCPUArray reads every slot of a per-CPU array in one batch: slot →
// one value per possible CPU, indexed by CPU number.
func ReadPerCPUArray[V any](m *ebpf.Map) ([][]V, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	n := int(m.MaxEntries())
	keys := make([]uint32, n)
	flat := make([]V, n*cpus)
	var cursor ebpf.MapBatchCursor
	got, err := m.BatchLookup(&cursor, keys, flat, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("read map %s: %w", m, err)
	}
	if got != n {
		return nil, fmt.Errorf("read map %s: %d of %d slots", m, got, n)
	}
	out := make([][]V, n)
	for i := range out {
		out[i] = flat[i*cpus : (i+1)*cpus : (i+1)*cpus]
	}
	return out, nil
}
