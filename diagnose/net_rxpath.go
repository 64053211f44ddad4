package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/netconfig"
)

// Rules about per-packet work on the receive path that a setting removes:
// GRO for UDP, unused netfilter tables, rp_filter, audit, IP ID.

// groChanges: GRO off on the interface.
var groChanges = []ChangeShape{{Kind: ChangeEthtoolFeature, Target: "<iface> rx-gro", Old: Values(ValueOn), New: Values(ValueOff)}}

func checkGROUDP(in NetInput, t Thresholds) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || !boolPtr(c.Offloads.GRO) {
		return nil
	}
	// A TCP service needs GRO (tcp.gro-off says the opposite when it is
	// off): never advise turning it off where TCP segments arrive.
	if e.TCP != nil && e.TCP.Counters.Window != nil && e.TCP.Counters.Window.InSegs > 0 {
		return nil
	}
	w, ok := weighGroup(e, "gro", t.Get(NetThresholds.FunctionShare), 1)
	if !ok {
		return nil
	}
	share := w.Share
	// UDP-only: the datagrams the UDP layer saw over the packets received.
	var rxPkts uint64
	for _, q := range e.Queues.RX {
		if q.KernelPackets != nil {
			rxPkts += *q.KernelPackets
		} else if q.DriverPackets != nil {
			rxPkts += *q.DriverPackets
		}
	}
	udp, udpKnown := e.Drops.InDatagrams()
	rcvbuf, _ := e.Drops.RcvbufErrors()
	udp += rcvbuf
	udpOnly, known := false, udpKnown && rxPkts > 0
	if known {
		udpOnly = float64(udp) >= t.Get(NetThresholds.UDPOnly)*float64(rxPkts)
		if !udpOnly {
			return nil // other traffic (TCP, tunnels) may need GRO
		}
	}
	iface := c.Interface.Name
	f := functionGroupFinding(t.Get(NetThresholds.FunctionWarn), w, fmt.Sprintf("GRO is on for a UDP receive path and costs %s of %s", pct(share), w.scope()))
	if known {
		f.Evidence = append(f.Evidence, fmt.Sprintf("%d UDP datagrams of %d packets received (%s): the receive path is UDP", udp, rxPkts, pct(float64(udp)/float64(rxPkts))))
	} else {
		f.Evidence = append(f.Evidence, "whether other protocols arrive on this interface was not measured")
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "GRO merges TCP segments (and tunnelled flows) into larger packets; UDP datagrams have boundaries and cannot be merged, so GRO only adds per-packet work on a UDP receive path.",
		Expected:  "Makita (LinuxCon Japan 2016): GRO took 4.9% of CPU; turning it off gave 5.05M → 5.18M tps (+2.6%).",
		Reference: Makita2016,
		Caveats: []string{
			"Do not turn GRO off where TCP receive throughput matters: TCP receivers lose it.",
			"Do not turn it off on KVM/VM hosts: GRO carries tunnelled and guest TCP traffic.",
		},
	}
	f.Recommendation.AddChanges(EthtoolFeatureChange(iface, "rx-gro", true, false))
	if e.Interface.Virtual {
		f.Recommendation.Caveats = append(f.Recommendation.Caveats, "On veth, GRO (with rx-udp-gro-forwarding) is what enables per-queue NAPI; off, packets take the per-CPU backlog instead.")
	}
	return f
}

// --- 11. netfilter loaded without rules ------------------------------------

// netfilterChanges: the modules of empty legacy tables and of their
// family's core, and empty nft tables (of any name: the revert recreates
// each from the description saved with it).
var netfilterChanges = []ChangeShape{
	{Kind: ChangeIptablesTable, Target: "{ipv4|ipv6} " + alternatives(legacyTables), Old: Values(ValueLoaded), New: Values(ValueUnloaded)},
	{Kind: ChangeModule, Target: "{ip_tables|ip6_tables}", Old: Values(ValueLoaded), New: Values(ValueUnloaded)},
	{Kind: ChangeNftTable, Target: "<*>", Old: Values(ValuePresent), New: Values(ValueAbsent)},
}

func checkNetfilterUnused(in NetInput, t Thresholds) *Finding {
	c, e := in.Config, in.Evidence
	// Loaded() is not required: a built-in nf_tables without module
	// parameters is invisible in /sys/module, but a listed nft table
	// proves it is there.
	if c == nil || c.Netfilter.RuleCounts == nil {
		return nil
	}
	w, ok := weighGroup(e, "netfilter", t.Get(NetThresholds.FunctionWaste), uint64(t.Get(NetThresholds.FunctionWasteSamples)))
	if !ok {
		return nil
	}
	plan := planNetfilterRemoval(c.Netfilter)
	if len(plan.changes) == 0 && len(plan.builtin) == 0 {
		return nil
	}
	if len(plan.changes) == 0 {
		return builtinLegacyFinding(t.Get(NetThresholds.FunctionWarn), w, plan, c.Netfilter)
	}
	f := functionGroupFinding(t.Get(NetThresholds.FunctionWarn), w, fmt.Sprintf("netfilter hooks run with empty tables and cost %s of %s", pct(w.Share), w.scope()))
	f.Evidence = append(f.Evidence, fmt.Sprintf("tables without a rule: %s (rule counts from %s)", strings.Join(plan.empty, ", "), c.Netfilter.RuleSource))
	caveats := []string{"Only if this host needs no packet filter: a firewall manager (firewalld, ufw, docker) will recreate the tables."}
	if plan.modules {
		caveats = append(caveats, "Kernel modules are host-wide: --apply unloads one only when no other network namespace exists, and refuses a legacy table that gained a rule, a user chain or a dropping policy since the run.")
	}
	for _, t := range plan.builtin {
		caveats = append(caveats, fmt.Sprintf("the empty legacy table %s is built into the kernel and cannot be unloaded: it stays until reboot (see the finding's advice when it is alone)", t))
	}
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "A loaded filter table registers netfilter hooks that every packet traverses even when the table has no rule; some distributions load them by default.",
		Expected:  "Makita (LinuxCon Japan 2016): iptables took 3% of CPU with no rules; unloading iptable_filter and ip_tables gave 5.18M → 5.38M tps (+3.9%).",
		Reference: Makita2016,
		Caveats:   caveats,
	}
	f.Recommendation.AddChanges(plan.changes...)
	return f
}

// netfilterRemoval is what can be done about empty tables: unload the
// modules of loaded legacy tables (and their family's core module when no
// other table of it is left), delete empty nft tables (--apply saves each
// in the revert file, which recreates it exactly); builtin lists empty
// legacy tables whose module is in the kernel image.
type netfilterRemoval struct {
	changes        []Change
	empty, builtin []string
	// modules: a change unloads a kernel module.
	modules bool
}

// legacyTables are the x_tables tables that hook packets on the receive
// path, with their modules (per family: iptable_X, ip6table_X).
var legacyTables = []string{"filter", "raw", "mangle"}

func planNetfilterRemoval(nf netconfig.Netfilter) netfilterRemoval {
	var p netfilterRemoval
	legacy := func(family, coreModule string) {
		var unloaded []string
		for _, table := range legacyTables {
			key := family + "/" + table
			count, listed := nf.RuleCounts[key]
			if !listed || count > 0 {
				continue
			}
			switch nf.Modules[iptablesModule(family, table)] {
			case netconfig.ModuleLoaded:
				p.empty = append(p.empty, key)
				p.changes = append(p.changes, IptablesTableUnloadChange(family, table))
				unloaded = append(unloaded, key)
			case netconfig.ModuleBuiltin:
				p.builtin = append(p.builtin, key)
			}
		}
		if len(unloaded) == 0 {
			return
		}
		p.modules = true
		// The core module goes too when every other table of the family
		// goes with it (nat, mangle load their own modules on top of it).
		others := 0
		for k := range nf.RuleCounts {
			if strings.HasPrefix(k, family+"/") && !slices.Contains(unloaded, k) {
				others++
			}
		}
		if others == 0 && nf.Modules[coreModule] == netconfig.ModuleLoaded {
			p.changes = append(p.changes, ModuleUnloadChange(coreModule))
		}
	}
	legacy("ipv4", "ip_tables")
	legacy("ipv6", "ip6_tables")
	var nftTables []string
	for k, n := range nf.RuleCounts {
		if strings.HasPrefix(k, "nft/") && n == 0 {
			nftTables = append(nftTables, strings.TrimPrefix(k, "nft/"))
		}
	}
	sort.Strings(nftTables)
	for _, t := range nftTables {
		family, name, _ := strings.Cut(t, "/")
		p.empty = append(p.empty, "nft "+t)
		// The table's base chains hook packets even without rules.
		p.changes = append(p.changes, NftTableDeleteChange(family, name))
	}
	return p
}

// builtinLegacyFinding reports empty legacy tables that cannot be removed:
// their module is built in, so they live as long as the namespace. The cost
// is real and measured; the advice is what created them and how to avoid
// it, never a command that cannot work, and no change.
func builtinLegacyFinding(warn float64, w groupWeight, p netfilterRemoval, nf netconfig.Netfilter) *Finding {
	f := functionGroupFinding(warn, w, fmt.Sprintf("empty legacy iptables tables (%s) hook every packet: %s of %s; built into the kernel, they cannot be removed", strings.Join(p.builtin, ", "), pct(w.Share), w.scope()))
	f.Severity = Info
	f.Evidence = append(f.Evidence, fmt.Sprintf("legacy x_tables without a rule: %s, in the kernel image (not a module); rule counts from %s", strings.Join(p.builtin, ", "), nf.RuleSource))
	f.Recommendation = Recommendation{
		Kind: KindAdvice,
		Why: "These tables exist only because a legacy iptables command touched them in this network namespace — iptables-legacy (even `iptables-legacy -L`: listing creates the table), an old iptables binary, or software built on legacy libiptc. " +
			"`iptables-save` of the nft variant (Debian/Ubuntu's default) does not show them. With the table code built into the kernel they cannot be unloaded: they stay, and keep hooking every packet, until reboot.",
		Apply: []string{
			"# find what created them: `iptables -V` ('(legacy)' or '(nf_tables)'), `update-alternatives --display iptables`, and services that call iptables-legacy",
			"# do not run iptables-legacy (not even -L) on this host or namespace; use nft or iptables-nft",
			"# the tables go away with a reboot, or run the service in a new network namespace, which starts without them",
		},
		Expected:  "Makita (LinuxCon Japan 2016): empty iptables tables took 3% of CPU; removing them gave 5.18M → 5.38M tps (+3.9%).",
		Reference: Makita2016,
	}
	return f
}

// --- 12. rp_filter ---------------------------------------------------------

// rpFilterChanges: rp_filter (strict 1 or loose 2) off for all and the
// interface, accept_local on.
var rpFilterChanges = []ChangeShape{
	{Kind: ChangeSysctl, Target: "net.ipv4.conf.{all|<iface>}.rp_filter", Old: Values("1", "2"), New: Values("0")},
	{Kind: ChangeSysctl, Target: "net.ipv4.conf.all.accept_local", Old: Values("0"), New: Values("1")},
}

func checkRPFilter(in NetInput, t Thresholds) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || c.RPFilter.EffectiveRPFilter == nil || *c.RPFilter.EffectiveRPFilter == 0 {
		return nil
	}
	w, ok := weighGroup(e, "fib-validation", t.Get(NetThresholds.FunctionShare)/2, 1)
	if !ok {
		return nil
	}
	share := w.Share
	iface := c.Interface.Name
	sv := c.RPFilter
	type knob struct{ name, scope string }
	var changes []Change
	set := func(k knob, want int64, values map[string]int64) {
		old, ok := values[k.scope]
		if !ok || old == want {
			return
		}
		changes = append(changes, SysctlChange(SysctlKey("net", "ipv4", "conf", k.scope, k.name), strconv.FormatInt(old, 10), strconv.FormatInt(want, 10)))
	}
	set(knob{"rp_filter", "all"}, 0, sv.RPFilter)
	set(knob{"rp_filter", iface}, 0, sv.RPFilter)
	set(knob{"accept_local", "all"}, 1, sv.AcceptLocal)
	if len(changes) == 0 {
		return nil
	}
	f := functionGroupFinding(t.Get(NetThresholds.FunctionWarn), w, fmt.Sprintf("reverse-path filtering (rp_filter=%d) validates every packet's source: %s of %s", *sv.EffectiveRPFilter, pct(share), w.scope()))
	f.Evidence = append(f.Evidence, fmt.Sprintf("rp_filter: all=%d %s=%d (effective %d); accept_local: all=%d", sv.RPFilter["all"], iface, sv.RPFilter[iface], *sv.EffectiveRPFilter, sv.AcceptLocal["all"]))
	f.Recommendation = Recommendation{
		Kind:      KindSetting,
		Why:       "With rp_filter on, fib_validate_source does a second FIB lookup per packet (the reverse path); accept_local=1 also skips the local-address check. Makita measured ~1.8% of CPU per lookup.",
		Expected:  "Makita (LinuxCon Japan 2016): 5.38M → 5.49M tps (+2%) with rp_filter=0 and accept_local=1.",
		Reference: Makita2016,
		Caveats: []string{
			"Security trade-off: rp_filter drops packets with spoofed source addresses (a source not routable back through the receiving interface); accept_local=1 accepts packets claiming a local source. Turn them off only where an upstream router or firewall already filters spoofed sources.",
		},
	}
	f.Recommendation.AddChanges(changes...)
	return f
}

// --- 13. audit -------------------------------------------------------------

// auditChanges: audit from enabled (1; 2 is locked) to 0.
var auditChanges = []ChangeShape{{Kind: ChangeAudit, Old: Values("1"), New: Values("0")}}

func checkAudit(in NetInput, t Thresholds) *Finding {
	c, e := in.Config, in.Evidence
	if c == nil || c.Audit.Enabled == nil || *c.Audit.Enabled == 0 {
		return nil
	}
	w, ok := weighGroup(e, "audit", t.Get(NetThresholds.FunctionShare)/2, 1)
	if !ok {
		return nil
	}
	share := w.Share
	enabled := *c.Audit.Enabled
	f := functionGroupFinding(t.Get(NetThresholds.FunctionWarn), w, fmt.Sprintf("kernel audit is on and costs %s of %s", pct(share), w.scope()))
	f.Evidence = append(f.Evidence, fmt.Sprintf("audit enabled=%d, auditd running: %v", enabled, c.Audit.AuditdRunning))
	r := &f.Recommendation
	r.Why = "With audit enabled every recvfrom/sendto syscall goes through the audit entry and exit hooks, a per-packet cost for a one-datagram-per-syscall server."
	r.Expected = "Makita (LinuxCon Japan 2016): audit took ~2.5% of CPU; disabling it gave 5.49M → 5.86M tps (+6.7%)."
	r.Reference = Makita2016
	r.Caveats = []string{"Audit is often a compliance requirement: disable it only where no policy needs the audit trail."}
	if enabled == 2 {
		r.Kind = KindAdvice
		r.Apply = []string{"# audit is locked (-e 2) until reboot: remove '-e 2' from /etc/audit/rules.d/*.rules, `systemctl disable auditd`, reboot"}
		return f
	}
	r.Kind = KindSetting
	r.AddChanges(AuditChange(enabled, 0))
	r.Caveats = append(r.Caveats, "Audit is host-wide, also when perfscope runs in a network namespace.", "auditctl -e 0 lasts until auditd restarts and loads its rules; Makita made it permanent with `systemctl disable auditd` and a reboot.")
	return f
}

// --- 14. IP ID selection ---------------------------------------------------

func checkIPIdent(in NetInput, t Thresholds) *Finding {
	w, ok := weighGroup(in.Evidence, "ip-ident", t.Get(NetThresholds.FunctionShare), 1)
	if !ok {
		return nil
	}
	share := w.Share
	f := functionGroupFinding(t.Get(NetThresholds.FunctionWarn), w, fmt.Sprintf("IP ID generation (__ip_select_ident) costs %s of %s", pct(share), w.scope()))
	f.Recommendation = Recommendation{
		Kind: KindCode,
		Why:  "Datagrams that may be fragmented need an IP ID, drawn from a shared hashed counter with an atomic per send; many replies to the same peers contend on its cache line. With DF set (IP_PMTUDISC_DO) the kernel skips it.",
		Code: []CodeSketch{
			{Lang: "c", Code: "int pmtu = IP_PMTUDISC_DO;\nsetsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));"},
			{Lang: "go", Code: "raw.Control(func(fd uintptr) {\n\terr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)\n})"},
		},
		Expected:  "Makita (LinuxCon Japan 2016): __ip_select_ident took 4.82% of CPU; skipping it gave 5.86M → 6.01M tps (+2.6%).",
		Reference: Makita2016,
		Caveats:   []string{"MTU: with IP_PMTUDISC_DO a datagram larger than the path MTU is never fragmented — sendto fails with EMSGSIZE. Use it only if replies always fit the MTU."},
	}
	return f
}

// --- 15. SMT off -----------------------------------------------------------
