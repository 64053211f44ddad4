package irq

import (
	"errors"
	"fmt"
	"os"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// Affinity is where the kernel may and does deliver one IRQ.
type Affinity struct {
	IRQ int `json:"irq"`
	// SMPAffinity is /proc/irq/N/smp_affinity: the CPUs allowed.
	SMPAffinity cpuset.Set `json:"smp_affinity"`
	// Effective is effective_affinity: the CPUs actually targeted (x86
	// delivers to one CPU of the allowed set). Known only on kernels and
	// architectures that expose it.
	Effective      cpuset.Set `json:"effective_affinity"`
	EffectiveKnown bool       `json:"effective_affinity_known"`
	// Hint is affinity_hint, what the driver suggests (ixgbe spreads queues
	// one per CPU); empty when the driver gives none. HintKnown is false
	// when the file is absent.
	Hint      cpuset.Set `json:"affinity_hint"`
	HintKnown bool       `json:"affinity_hint_known"`
	// Node is /proc/irq/N/node, the NUMA node of the device; nil when absent
	// or -1.
	Node *int `json:"node"`
}

// HintIgnored reports whether a driver hint exists and the allowed set does
// not follow it — Makita's irqbalance without "-h exact".
func (a Affinity) HintIgnored() bool {
	return a.HintKnown && !a.Hint.IsEmpty() && !a.SMPAffinity.Equal(a.Hint)
}

// Affinity reads /proc/irq/N. An IRQ that does not exist returns an error
// wrapping os.ErrNotExist.
func (fs FS) Affinity(irq int) (Affinity, error) {
	cfs := cpuset.FS{FS: fs.FS}
	dir := fmt.Sprintf("/proc/irq/%d", irq)
	a := Affinity{IRQ: irq}
	var err error
	if a.SMPAffinity, err = cfs.ReadMask(dir + "/smp_affinity"); err != nil {
		return a, fmt.Errorf("irq %d: %w", irq, err)
	}
	a.Effective, a.EffectiveKnown, err = optionalMask(cfs, dir+"/effective_affinity")
	if err != nil {
		return a, err
	}
	a.Hint, a.HintKnown, err = optionalMask(cfs, dir+"/affinity_hint")
	if err != nil {
		return a, err
	}
	if n, err := fs.ReadInt(dir + "/node"); err == nil && n >= 0 {
		node := int(n)
		a.Node = &node
	}
	return a, nil
}

func optionalMask(cfs cpuset.FS, path string) (cpuset.Set, bool, error) {
	s, err := cfs.ReadMask(path)
	if errors.Is(err, os.ErrNotExist) {
		return cpuset.Set{}, false, nil
	}
	if err != nil {
		return cpuset.Set{}, false, err
	}
	return s, true, nil
}
