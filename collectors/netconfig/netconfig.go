// Package netconfig gathers, in one call, the network configuration that
// the network rules judge: queues and their RPS/XPS, channels, RSS, offload
// features, IRQ placement and irqbalance, CPU topology, netfilter, source
// validation, audit, the net.core buffers, budgets and busy polling, and
// the NAPI settings. Every optional
// source is either present or explicitly unknown (nil pointer or a Known
// flag, with the reason in Unavailable) — never a silent zero — so that the
// rules can be pure functions of a NetConfig.
package netconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/irq"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/procfs"
)

// NetConfig is the configuration snapshot of one interface and the host.
type NetConfig struct {
	Interface netdev.Interface `json:"interface"`
	// Driver, Channels, Features and RSS come from ethtool; nil when the
	// driver does not support the request (reason in Unavailable).
	Driver   *ethtool.DriverInfo `json:"driver"`
	Channels *ethtool.Channels   `json:"channels"`
	Offloads Offloads            `json:"offloads"`
	RSS      *ethtool.RSS        `json:"rss"`
	// Rings and Coalesce are ethtool -g and -c; nil when the driver does
	// not support them (reason in Unavailable).
	Rings    *ethtool.Rings    `json:"rings"`
	Coalesce *ethtool.Coalesce `json:"coalesce"`
	// IRQs are the interface's queue IRQs with their affinities; empty for
	// virtual devices.
	IRQs       []QueueIRQ       `json:"irqs"`
	Irqbalance irq.Irqbalance   `json:"irqbalance"`
	Topology   cpuset.Topology  `json:"topology"`
	Netfilter  Netfilter        `json:"netfilter"`
	RPFilter   SourceValidation `json:"source_validation"`
	Audit      Audit            `json:"audit"`
	Core       CoreSysctls      `json:"net_core"`
	NAPI       NAPIConfig       `json:"napi"`
	// Unavailable maps a section name ("rss", "channels", "audit", ...) to
	// why it could not be read.
	Unavailable map[string]string `json:"unavailable"`
}

// Offloads are the features the diagnosis reads; nil when the device does
// not list the feature (older kernels lack rx-udp-gro-forwarding).
type Offloads struct {
	GRO              *bool `json:"gro"`
	GSO              *bool `json:"gso"`
	TSO              *bool `json:"tso"`
	LRO              *bool `json:"lro"`
	GROHW            *bool `json:"gro_hw"`
	UDPGROForwarding *bool `json:"rx_udp_gro_forwarding"`
	// NTuple is the ntuple filters (rx-ntuple-filter), which accelerated
	// RFS programs; NTupleFixed says ethtool -K cannot change it.
	NTuple      *bool `json:"rx_ntuple_filter"`
	NTupleFixed bool  `json:"rx_ntuple_filter_fixed,omitempty"`
}

// QueueIRQ is one queue IRQ of the interface and where it may, does and
// should run.
type QueueIRQ struct {
	irq.QueueIRQ
	Affinity *irq.Affinity `json:"affinity"`
}

// CoreSysctls are net.core settings; nil when absent.
type CoreSysctls struct {
	RmemMax           *int64 `json:"rmem_max_bytes"`
	RmemDefault       *int64 `json:"rmem_default_bytes"`
	NetdevMaxBacklog  *int64 `json:"netdev_max_backlog_packets"`
	NetdevBudget      *int64 `json:"netdev_budget_packets"`
	NetdevBudgetUsecs *int64 `json:"netdev_budget_usecs"`
	// RmemWritable says whether rmem_max and rmem_default can be set here:
	// outside the initial network namespace the kernel shows them as
	// read-only (mode 0444) copies of the host's values. Nil when absent.
	RmemWritable *bool `json:"rmem_writable"`
	// FlowLimitCPUBitmap is net.core.flow_limit_cpu_bitmap (a cpumask, "0"
	// when off); RPSSockFlowEntries is net.core.rps_sock_flow_entries
	// (RFS's global flow table, 0 when RFS is off). Nil when absent.
	FlowLimitCPUBitmap *string `json:"flow_limit_cpu_bitmap"`
	RPSSockFlowEntries *int64  `json:"rps_sock_flow_entries"`
	// BusyRead and BusyPoll are net.core.busy_read and busy_poll (µs a
	// socket read, or poll/select/epoll, spins on the device's queue
	// before sleeping; 0: off). Nil when absent (CONFIG_NET_RX_BUSY_POLL
	// off).
	BusyRead *int64 `json:"busy_read_us"`
	BusyPoll *int64 `json:"busy_poll_us"`
	// UDPMem is net.ipv4.udp_mem: min, pressure and max, in pages, for
	// all UDP sockets together; nil when absent.
	UDPMem *[3]int64 `json:"udp_mem_pages"`
	// HostOnly is true when this network namespace does not show the
	// host-wide sysctls (netdev_budget, netdev_max_backlog,
	// flow_limit_cpu_bitmap, rps_sock_flow_entries, udp_mem): the kernel
	// registers them in the initial namespace only, so they can be read and
	// set only there.
	HostOnly bool `json:"host_only_sysctls_hidden"`
}

// SourceValidation is rp_filter and accept_local (net.ipv4.conf.*). The
// effective rp_filter of an interface is max(all, interface).
type SourceValidation struct {
	// RPFilter maps "all", "default" and interface names to 0 (off),
	// 1 (strict) or 2 (loose).
	RPFilter    map[string]int64 `json:"rp_filter"`
	AcceptLocal map[string]int64 `json:"accept_local"`
	// EffectiveRPFilter is max(all, iface) for the snapshot's interface;
	// nil when either is unknown.
	EffectiveRPFilter *int64 `json:"effective_rp_filter"`
}

// Sources are the live or recorded inputs of Snapshot.
type Sources struct {
	FS      procfs.FS
	Ethtool ethtool.Source
	// Audit asks the kernel for audit status (AUDIT_GET); nil skips it.
	Audit func() (AuditStatus, error)
	// Rules counts netfilter rules; nil reports counts as unknown.
	Rules RuleCounter
	// NAPIs lists an interface's NAPI instances (netdev netlink); nil
	// leaves them unavailable.
	NAPIs func(ifindex int) ([]netlinkq.NAPI, error)
}

// Live reads the running system.
func Live() Sources {
	s := Sources{FS: procfs.Default, Ethtool: ethtool.Ioctl{}, Audit: auditStatusNetlink, NAPIs: netlinkq.NAPIs}
	s.Rules = NativeRuleCounter{Sources: s}
	return s
}

// Snapshot gathers everything for iface. It fails only when the interface
// does not exist (netdev.ErrNoInterface) or the basic /sys and /proc files
// cannot be read; every optional source that fails is recorded in
// Unavailable and the rest is still returned.
func (s Sources) Snapshot(iface string) (NetConfig, error) {
	c := NetConfig{Unavailable: map[string]string{}}
	nd := netdev.FS{FS: s.FS}
	var err error
	if c.Interface, err = nd.Interface(iface); err != nil {
		return c, err
	}
	if c.Topology, err = (cpuset.FS{FS: s.FS}).Topology(); err != nil {
		return c, fmt.Errorf("cpu topology: %w", err)
	}
	s.ethtoolSections(&c, iface)
	// The daemons the diagnosis asks about, found in one scan of every
	// process's comm.
	running, runningErr := s.FS.Running("irqbalance", "auditd")
	s.irqSections(&c, nd, iface, running, runningErr)
	c.Netfilter = s.netfilter(&c)
	c.RPFilter = s.sourceValidation(iface)
	c.Audit = s.audit(&c, running["auditd"] > 0)
	c.Core = CoreSysctls{
		RmemMax: s.sysctl("net.core.rmem_max"), RmemDefault: s.sysctl("net.core.rmem_default"),
		NetdevMaxBacklog: s.sysctl("net.core.netdev_max_backlog"), NetdevBudget: s.sysctl("net.core.netdev_budget"),
		NetdevBudgetUsecs:  s.sysctl("net.core.netdev_budget_usecs"),
		RmemWritable:       s.sysctlWritable("net.core.rmem_default", "net.core.rmem_max"),
		RPSSockFlowEntries: s.sysctl("net.core.rps_sock_flow_entries"),
		FlowLimitCPUBitmap: s.sysctlString("net.core.flow_limit_cpu_bitmap"),
		UDPMem:             s.udpMem(),
		BusyRead:           s.sysctl("net.core.busy_read"),
		BusyPoll:           s.sysctl("net.core.busy_poll"),
	}
	c.NAPI = s.napi(iface, c.Interface.Index)
	// rmem_max is per namespace, netdev_budget only in the initial one.
	if c.Core.NetdevBudget == nil && c.Core.RmemMax != nil {
		c.Core.HostOnly = true
		c.Unavailable["host_sysctls"] = "net.core.netdev_budget, netdev_budget_usecs, netdev_max_backlog, flow_limit_cpu_bitmap, rps_sock_flow_entries and net.ipv4.udp_mem are host-wide: this network namespace does not show them"
	}
	return c, nil
}

// sysctlWritable reports whether every named sysctl has a write bit.
// /proc/sys files carry the mode the kernel enforces (even on root), so the
// bits answer without trying a write.
func (s Sources) sysctlWritable(names ...string) *bool {
	writable := true
	for _, name := range names {
		st, err := os.Stat(s.FS.Path("/proc/sys/" + strings.ReplaceAll(name, ".", "/")))
		if err != nil {
			return nil
		}
		writable = writable && st.Mode().Perm()&0o222 != 0
	}
	return &writable
}

func (s Sources) ethtoolSections(c *NetConfig, iface string) {
	if s.Ethtool == nil {
		c.Unavailable["ethtool"] = "no ethtool source"
		return
	}
	if d, err := s.Ethtool.DriverInfo(iface); err == nil {
		c.Driver = &d
	} else {
		c.Unavailable["driver"] = err.Error()
	}
	if ch, err := s.Ethtool.Channels(iface); err == nil {
		c.Channels = &ch
	} else {
		c.Unavailable["channels"] = err.Error()
	}
	if r, err := s.Ethtool.RSS(iface); err == nil {
		c.RSS = &r
	} else {
		c.Unavailable["rss"] = err.Error()
	}
	if rs, ok := s.Ethtool.(ethtool.RingSource); ok {
		if r, err := rs.Rings(iface); err == nil {
			c.Rings = &r
		} else {
			c.Unavailable["rings"] = err.Error()
		}
		if co, err := rs.Coalesce(iface); err == nil {
			c.Coalesce = &co
		} else {
			c.Unavailable["coalesce"] = err.Error()
		}
	} else {
		c.Unavailable["rings"] = "the ethtool source does not read rings"
	}
	f, err := s.Ethtool.Features(iface)
	if err != nil {
		c.Unavailable["features"] = err.Error()
		return
	}
	c.Offloads = Offloads{
		GRO: f.Active(ethtool.FeatureGRO), GSO: f.Active(ethtool.FeatureGSO), TSO: f.Active(ethtool.FeatureTSO),
		LRO: f.Active(ethtool.FeatureLRO), GROHW: f.Active(ethtool.FeatureGROHW), UDPGROForwarding: f.Active(ethtool.FeatureUDPGROForwarding),
		NTuple: f.Active(ethtool.FeatureNTuple),
	}
	if nt, ok := f.Lookup(ethtool.FeatureNTuple); ok {
		c.Offloads.NTupleFixed = nt.Fixed
	}
}

func (s Sources) irqSections(c *NetConfig, nd netdev.FS, iface string, running map[string]int, runningErr error) {
	ifs := irq.FS{FS: s.FS}
	var err error
	if runningErr != nil {
		c.Unavailable["irqbalance"] = runningErr.Error()
	} else if c.Irqbalance, err = ifs.IrqbalanceOf(running["irqbalance"]); err != nil {
		c.Unavailable["irqbalance"] = err.Error()
	}
	if c.Interface.Virtual {
		c.Unavailable["irqs"] = "virtual device: no IRQs"
		return
	}
	in, err := ifs.Interrupts()
	if err != nil {
		c.Unavailable["irqs"] = err.Error()
		return
	}
	dev := irq.Device{Interface: iface}
	dev.MSIIRQs, _ = nd.MSIIRQs(iface)
	if c.Driver != nil {
		dev.PCIAddress = c.Driver.BusInfo
	}
	if target, err := os.Readlink(s.FS.Path("/sys/class/net/" + iface + "/device")); err == nil && strings.HasPrefix(filepath.Base(target), "virtio") {
		dev.Virtio = filepath.Base(target)
	}
	for _, q := range irq.QueueIRQs(in, dev) {
		qi := QueueIRQ{QueueIRQ: q}
		if a, err := ifs.Affinity(q.IRQ); err == nil {
			qi.Affinity = &a
		}
		c.IRQs = append(c.IRQs, qi)
	}
	if len(c.IRQs) == 0 {
		c.Unavailable["irqs"] = "no IRQ of " + iface + " found in /proc/interrupts"
	}
}

func (s Sources) sysctl(name string) *int64 {
	v, ok, err := s.FS.SysctlInt(name)
	if err != nil || !ok {
		return nil
	}
	return &v
}

func (s Sources) sysctlString(name string) *string {
	v, err := s.FS.Sysctl(name)
	if err != nil {
		return nil
	}
	return &v
}

// udpMem reads net.ipv4.udp_mem ("min pressure max" in pages).
func (s Sources) udpMem() *[3]int64 {
	v, err := s.FS.Sysctl("net.ipv4.udp_mem")
	if err != nil {
		return nil
	}
	f := strings.Fields(v)
	if len(f) != 3 {
		return nil
	}
	var out [3]int64
	for i, w := range f {
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return nil
		}
		out[i] = n
	}
	return &out
}

func (s Sources) sourceValidation(iface string) SourceValidation {
	sv := SourceValidation{RPFilter: map[string]int64{}, AcceptLocal: map[string]int64{}}
	for _, scope := range []string{"all", "default", iface} {
		if v := s.sysctl(procfs.InterfaceSysctl("ipv4", scope, "rp_filter")); v != nil {
			sv.RPFilter[scope] = *v
		}
		if v := s.sysctl(procfs.InterfaceSysctl("ipv4", scope, "accept_local")); v != nil {
			sv.AcceptLocal[scope] = *v
		}
	}
	all, okAll := sv.RPFilter["all"]
	dev, okDev := sv.RPFilter[iface]
	if okAll && okDev {
		eff := max(all, dev)
		sv.EffectiveRPFilter = &eff
	}
	return sv
}
