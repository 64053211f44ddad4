package cpuprofile

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/perfscope/perfscope/probes"
)

// Snapshot reads every counted tuple and its stacks. Counts are cumulative
// since Start (with Continuous, since the last Drain).
func (p *Profiler) Snapshot() (Profile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: snapshot after Close")
	}
	counts, stacks := p.generation(p.gen)
	prof, _, err := p.read(counts, stacks)
	return prof, err
}

// generation is generation g's count hash and stack map.
func (p *Profiler) generation(g uint32) (counts, stacks *ebpf.Map) {
	if g == 0 {
		return p.objs.SampleCounts, p.objs.StackTraces
	}
	return p.objs.SampleCounts1, p.objs.StackTraces1
}

// read reads one generation: every counted tuple with its stacks, and the
// keys it read them under. Lost is cumulative since Start.
func (p *Profiler) read(counts, stacks *ebpf.Map) (Profile, []cpuprofileSampleKey, error) {
	prof := Profile{Taken: time.Now()}
	var err error
	if prof.Lost, err = p.readLost(); err != nil {
		return prof, nil, err
	}
	if prof.CPUs, err = p.readCounts(); err != nil {
		return prof, nil, err
	}
	// Both tables in batches: a few system calls where looking up each
	// count and stack took two or more each.
	read, err := probes.ReadHash[uint64, cpuprofileStackFrames](stacks)
	if err != nil {
		return prof, nil, fmt.Errorf("read stacks: %w", err)
	}
	cache := map[uint64][]uint64{}
	stack := func(hash uint64, present bool) ([]uint64, error) {
		if !present {
			return nil, nil
		}
		if s, ok := cache[hash]; ok {
			return s, nil
		}
		f, ok := read[hash]
		if !ok {
			// Stored after the batch read, with its count (stacks are
			// stored before the count that names them).
			if err := stacks.Lookup(hash, &f); err != nil {
				return nil, fmt.Errorf("read stack %#x: %w", hash, err)
			}
		}
		s := trimStack(f.Ips[:])
		cache[hash] = s
		return s, nil
	}

	counted, err := probes.ReadHash[cpuprofileSampleKey, uint64](counts)
	if err != nil {
		return prof, nil, fmt.Errorf("read sample counts: %w", err)
	}
	keys := make([]cpuprofileSampleKey, 0, len(counted))
	for key := range counted {
		keys = append(keys, key)
	}
	// In a stable order (the keys' fields), not the hash's.
	slices.SortFunc(keys, compareSampleKeys)
	for _, key := range keys {
		s := Sample{PID: int(key.Tgid), TID: int(key.Pid), CPU: int(key.Cpu), Comm: probes.CommString(key.Comm), Count: counted[key]}
		if s.KernelStack, err = stack(key.KernelStack, key.Halves&halfKernel != 0); err != nil {
			return prof, keys, err
		}
		if s.UserStack, err = stack(key.UserStack, key.Halves&halfUser != 0); err != nil {
			return prof, keys, err
		}
		prof.Samples = append(prof.Samples, s)
	}
	return prof, keys, nil
}

// compareSampleKeys orders sample keys by process, thread, CPU and stacks.
func compareSampleKeys(a, b cpuprofileSampleKey) int {
	return cmp.Or(cmp.Compare(a.Tgid, b.Tgid), cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Cpu, b.Cpu),
		cmp.Compare(a.KernelStack, b.KernelStack), cmp.Compare(a.UserStack, b.UserStack), cmp.Compare(a.Halves, b.Halves),
		slices.Compare(a.Comm[:], b.Comm[:]))
}

// drainWait bounds the wait for programs still writing to the generation
// being left. Each runs for microseconds, at Frequency per CPU: the
// counter is almost always zero at the first look.
const drainWait = time.Second

// Drain returns what was counted since the last Drain (since Start for the
// first) and empties it out of the kernel, so that a profiler read window
// after window keeps its maps — and perfscope's memory — bounded by one
// window's distinct stacks, not by every stack ever seen. It switches the
// program to the other generation of maps first, waits until no program
// is still writing to the one left, then reads and empties that one:
// samples taken meanwhile go to the new generation and are the next
// Drain's, none lost or counted twice. Needs Options.Continuous.
func (p *Profiler) Drain() (Profile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: drain after Close")
	}
	if !p.opts.Continuous {
		return Profile{Taken: time.Now()}, errors.New("cpuprofile: drain of a profiler opened without Continuous")
	}
	if !p.leaving {
		next := p.gen ^ 1
		if err := p.objs.Generation.Update(uint32(0), next, ebpf.UpdateExist); err != nil {
			return Profile{Taken: time.Now()}, fmt.Errorf("switch sample generation: %w", err)
		}
		p.gen, p.leaving = next, true
	}
	if err := p.waitIdle(); err != nil {
		return Profile{Taken: time.Now()}, err
	}
	counts, stacks := p.generation(p.gen ^ 1)
	prof, keys, err := p.read(counts, stacks)
	if err != nil {
		return prof, err
	}
	if err := clearGeneration(counts, stacks, keys); err != nil {
		return prof, err
	}
	p.leaving = false
	lost, taken := prof.Lost, prof.CPUs
	prof.Lost, prof.CPUs = lost.sub(p.drainedLost), subCounts(taken, p.drainedCounts)
	p.drainedLost, p.drainedCounts = lost, taken
	return prof, nil
}

// waitIdle waits until no program runs (in_flight[0] is zero): those that
// started before the generation switched have finished.
func (p *Profiler) waitIdle() error {
	deadline := time.Now().Add(drainWait)
	for {
		var running uint64
		if err := p.objs.InFlight.Lookup(uint32(0), &running); err != nil {
			return fmt.Errorf("read in-flight samples: %w", err)
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cpuprofile: %d sampling programs still running after %v", running, drainWait)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// clearGeneration empties a generation nothing writes to: the count keys
// just read, then every stack id left, including those of samples that were
// lost after their first half was stored (a count-hash miss, a user stack
// fault), which would otherwise hold stack map buckets forever.
func clearGeneration(counts, stacks *ebpf.Map, keys []cpuprofileSampleKey) error {
	if len(keys) > 0 {
		if _, err := counts.BatchDelete(keys, nil); err != nil {
			if !errors.Is(err, ebpf.ErrNotSupported) {
				return fmt.Errorf("empty sample counts: %w", err)
			}
			// Kernels before 5.6 have no batch operations.
			for i := range keys {
				if err := counts.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					return fmt.Errorf("empty sample counts: %w", err)
				}
			}
		}
	}
	_, err := emptyMap[uint64](stacks, "stack map")
	return err
}

// emptyMap lists a map's keys, then deletes each, and returns those it
// deleted: for maps without batch operations (a stack map) or kernels
// without them (before 5.6). A key added in between stays.
func emptyMap[K uint32 | uint64](m *ebpf.Map, name string) ([]K, error) {
	var keys []K
	var key K
	var prev any // nil: the first key
	for {
		if err := m.NextKey(prev, &key); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return nil, fmt.Errorf("list %s: %w", name, err)
		}
		keys = append(keys, key)
		cur := key
		prev = &cur
	}
	for i, key := range keys {
		if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return keys[:i], fmt.Errorf("empty %s: %w", name, err)
		}
	}
	return keys, nil
}

// PIDs lists the processes (tgids) sampled since the previous call (since
// Start for the first), without reading stacks, so that a caller polling
// it can read the mappings of short-lived processes before they exit. The
// program notes each sampled process in sampled_tgids; PIDs reads and
// empties that map, so a call costs syscalls in proportion to the
// processes new since the last one rather than to every stack counted:
// reading all of sample_counts' keys four times a second for the same
// answer was about a tenth of perfscope's own CPU while a UDP flood ran.
// A process sampled again after a call is named again; one noted while the
// map was full is not named at all (its samples still count: its mappings
// are read at symbolization instead).
func (p *Profiler) PIDs() ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.objs == nil {
		return nil, errors.New("cpuprofile: PIDs after Close")
	}
	m := p.objs.SampledTgids
	var out []int
	tgids := make([]uint32, pidBatch)
	noted := make([]uint8, pidBatch)
	var cursor ebpf.MapBatchCursor
	for {
		// Each batch reads and deletes whole hash buckets at once: a
		// process noted after its bucket was read stays for the next call.
		n, err := m.BatchLookupAndDelete(&cursor, tgids, noted, nil)
		for _, tgid := range tgids[:n] {
			out = append(out, int(tgid))
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return out, nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && len(out) == 0 {
			// Kernels before 5.6 have no batch operations.
			tgids, err := emptyMap[uint32](m, "sampled_tgids")
			for _, tgid := range tgids {
				out = append(out, int(tgid))
			}
			return out, err
		}
		if err != nil {
			// What was read is already deleted: return it with the error.
			return out, fmt.Errorf("read sampled_tgids: %w", err)
		}
	}
}

// pidBatch is how many tgids PIDs reads per syscall: far more than a hash
// bucket holds (a batch must take a whole bucket). A variable so the test
// can make a read span batches.
var pidBatch = 256

func (p *Profiler) readLost() (Lost, error) {
	m := p.objs.LostSamples
	sum := func(r cpuprofileLostReason) (uint64, error) {
		var perCPU []uint64
		if err := m.Lookup(r, &perCPU); err != nil {
			return 0, fmt.Errorf("read lost_samples[%d]: %w", r, err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n, nil
	}
	var l Lost
	for r, dst := range map[cpuprofileLostReason]*uint64{
		cpuprofileLostReasonLOST_KERNEL_STACKS_FULL: &l.KernelStacksFull,
		cpuprofileLostReasonLOST_KERNEL_STACK_FAULT: &l.KernelStackFaults,
		cpuprofileLostReasonLOST_USER_STACKS_FULL:   &l.UserStacksFull,
		cpuprofileLostReasonLOST_USER_STACK_FAULT:   &l.UserStackFaults,
		cpuprofileLostReasonLOST_COUNTS_FULL:        &l.CountsFull,
	} {
		n, err := sum(r)
		if err != nil {
			return l, err
		}
		*dst = n
	}
	return l, nil
}

// readCounts reads, per CPU, the samples taken (the program's own run
// counter, selfcost.h) and the event's enabled and running times, both
// cumulative since Start; after Stop, the reading Stop took.
func (p *Profiler) readCounts() ([]CPUCount, error) {
	if p.events == nil {
		return p.stopped, nil
	}
	costs, err := p.SelfCosts()
	if err != nil {
		return nil, fmt.Errorf("read samples taken per CPU: %w", err)
	}
	runs := costs[cpuprofileProgOnCpuClock]
	out := make([]CPUCount, 0, len(p.events))
	for _, ev := range p.events {
		c, err := ev.read()
		if err != nil {
			return nil, err
		}
		if ev.cpu < len(runs) {
			c.Taken = runs[ev.cpu].Runs
		}
		out = append(out, c)
	}
	return out, nil
}

// The bits of sample_key.halves (enum stack_half in bpf/types.h, which
// bpf2go cannot see: no map or variable has that type).
const (
	halfKernel = 1
	halfUser   = 2
)

// trimStack cuts the zero padding after the last frame.
func trimStack(ips []uint64) []uint64 {
	n := 0
	for n < len(ips) && ips[n] != 0 {
		n++
	}
	return append([]uint64(nil), ips[:n]...)
}
