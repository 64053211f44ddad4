package diagnose

import (
	"fmt"
	"slices"

	"github.com/perfscope/perfscope/collectors/netconfig"
)

// NAPISetSource names the change that gave each NAPI instance settings of
// its own, settable through netlink's napi-set.
const NAPISetSource = "Joe Damato, \"netdev-genl: Support setting per-NAPI config values\" (Linux 6.13, 2024)"

// NAPIBusyQueueIRQsPerS: a NAPI instance whose IRQ fires at or above this
// rate is one of the busy queues deferral is for (NAPIStormIRQsPerS over
// ten queues).
const NAPIBusyQueueIRQsPerS = NAPIStormIRQsPerS / 10

// napiInstanceChanges are the per-instance proposals of
// net.napi-defer-irqs and net.napi-irq-suspend-misconfigured.
var napiInstanceChanges = []ChangeShape{{Kind: ChangeNAPI, Target: "<iface> <n>", Old: KindForm, New: KindForm}}

// napiPerInstance reports whether every NAPI instance of the device
// reports its own deferral settings (napi-get on 6.13+, where napi-set
// can write them).
func napiPerInstance(n netconfig.NAPIConfig) bool {
	if len(n.Instances) == 0 {
		return false
	}
	for _, i := range n.Instances {
		if i.DeferHardIRQs == nil || i.GROFlushTimeoutNs == nil {
			return false
		}
	}
	return true
}

// busyNAPIs are the instances whose IRQ fired at NAPIBusyQueueIRQsPerS or
// more over the window, with their rates, in id order.
func busyNAPIs(in NetInput) (busy []netconfig.NAPIInstance, rates map[uint32]float64) {
	secs := seconds(in.Evidence.DurationNs)
	if secs <= 0 {
		return nil, nil
	}
	perIRQ := map[int]uint64{}
	for _, q := range in.Evidence.IRQs.IRQs {
		for _, n := range q.CountByCPU {
			perIRQ[q.IRQ] += n
		}
	}
	rates = map[uint32]float64{}
	for _, inst := range in.Config.NAPI.Instances {
		if inst.IRQ < 0 {
			continue
		}
		if r := float64(perIRQ[inst.IRQ]) / secs; r >= NAPIBusyQueueIRQsPerS {
			busy = append(busy, inst)
			rates[inst.ID] = r
		}
	}
	slices.SortFunc(busy, func(a, b netconfig.NAPIInstance) int { return int(a.ID) - int(b.ID) })
	return busy, rates
}

// napiQueue is the RX queue NAPI instance id served in the run's
// queue × CPU matrix, nil when it maps to none.
func napiQueue(in NetInput, id uint32) *int {
	for _, c := range in.Evidence.QueueCPU.Cells {
		if c.NAPI == id && c.Queue >= 0 {
			q := c.Queue
			return &q
		}
	}
	return nil
}

// addNAPIInstanceChanges proposes napi-set on the given instances: the
// deferral settings each holds now to napi.rst's example values.
func addNAPIInstanceChanges(in NetInput, r *Recommendation, insts []netconfig.NAPIInstance) {
	for _, inst := range insts {
		old := map[string]uint64{"defer-hard-irqs": uint64(*inst.DeferHardIRQs), "gro-flush-timeout": *inst.GROFlushTimeoutNs}
		new := map[string]uint64{"defer-hard-irqs": NAPIDeferHardIRQs, "gro-flush-timeout": NAPIGROFlushTimeoutNs}
		r.AddChanges(NAPISettingsChange(in.Config.Interface.Name, napiQueue(in, inst.ID), inst.ID, old, new))
	}
}

// napiGranularity decides between the device-wide files and napi-set on
// the busy instances: per instance where the kernel has napi-set and
// either only some queues are busy or the device has no sysfs files.
// perInstance lists the instances to set (nil: device-wide); note says
// why, for the evidence.
func napiGranularity(in NetInput) (perInstance []netconfig.NAPIInstance, note string) {
	n := in.Config.NAPI
	sysfs := n.DeferHardIRQs != nil && n.GROFlushTimeoutNs != nil
	if !napiPerInstance(n) {
		if len(n.Instances) > 0 {
			note = "this kernel reports no per-NAPI settings (napi-set needs Linux 6.13): only the device-wide files can defer IRQs"
		}
		return nil, note
	}
	busy, rates := busyNAPIs(in)
	switch {
	case len(busy) > 0 && len(busy) < len(n.Instances):
		note = fmt.Sprintf("%d of %d NAPI instances are busy (IRQ at %d/s or more):", len(busy), len(n.Instances), NAPIBusyQueueIRQsPerS)
		for _, b := range busy {
			note += fmt.Sprintf(" %d (IRQ %d, %.0f/s)", b.ID, b.IRQ, rates[b.ID])
		}
		return busy, note + "; napi-set defers those only"
	case !sysfs && len(busy) > 0:
		return busy, "the device has no napi_defer_hard_irqs/gro_flush_timeout files; napi-set sets its busy NAPI instances"
	case !sysfs:
		return n.Instances, "the device has no napi_defer_hard_irqs/gro_flush_timeout files and no instance's IRQ is known; napi-set sets every NAPI instance"
	}
	return nil, ""
}
