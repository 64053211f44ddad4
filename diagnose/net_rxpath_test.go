package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

func TestGROUDP(t *testing.T) {
	runNetCases(t, "net.gro-udp", []netCase{
		{name: "Makita's 4.9%", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Warn || r.Apply[0] != "ethtool -K ens1f0 rx-gro off" || r.Revert[0] != "ethtool -K ens1f0 rx-gro on" || !r.Changes[0].Equal(EthtoolFeatureChange("ens1f0", "rx-gro", true, false)) {
				t.Errorf("%v %q %q", f.Severity, r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "3680000 UDP datagrams of 3680000 packets")
			contains(t, "caveats", r.Caveats, "TCP receivers", "VM hosts")
		}},
		{name: "TCP traffic too", silent: true, edit: func(in *NetInput) { in.Evidence.Drops.UDPSNMP.UDP.InDatagrams = 100 }},
		{name: "GRO off", silent: true, edit: func(in *NetInput) { off := false; in.Config.Offloads.GRO = &off }},
		{name: "GRO cheap", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[0].Share = 0.002 }},
		// perfscope tcp: UDP counters unmeasured, TCP segments arrived.
		{name: "a TCP run that received segments", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops = evidence.DropSection{}
			in.Evidence.TCP = &evidence.TCPEvidence{Counters: evidence.TCPCounterSection{Window: &evidence.TCPCounters{InSegs: 5000}}}
		}},
		{name: "a TCP run without TCP traffic", edit: func(in *NetInput) {
			in.Evidence.TCP = &evidence.TCPEvidence{Counters: evidence.TCPCounterSection{Window: &evidence.TCPCounters{}}}
		}, want: func(t *testing.T, f *Finding) {}},
	})
}

func TestNetfilterUnused(t *testing.T) {
	runNetCases(t, "net.netfilter-unused", []netCase{
		{name: "empty filter table, nat in use", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ip_tables stays: the nat table has a rule.
			if len(r.Changes) != 1 || !r.Changes[0].Equal(IptablesTableUnloadChange("ipv4", "filter")) || !slices.Equal(r.Apply, []string{"modprobe -r iptable_filter"}) || !slices.Equal(r.Revert, []string{"modprobe iptable_filter"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "tables without a rule: ipv4/filter")
		}},
		{name: "only an empty filter table", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if !slices.Equal(r.Apply, []string{"modprobe -r iptable_filter", "modprobe -r ip_tables"}) || !slices.Equal(r.Revert, []string{"modprobe ip_tables", "modprobe iptable_filter"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "empty nftables table", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"nft/ip/filter": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// No file outside the revert file: the table is saved in it.
			if r.Apply[0] != "nft delete table ip filter" || !strings.HasPrefix(r.Revert[0], "# perfscope udp --revert recreates nft table ip filter") || !r.Changes[0].Equal(NftTableDeleteChange("ip", "filter")) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "hostile nftables table name", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"nft/ip/x$(>pwnednft)": 0, "nft/inet/a/../../../tmp/x": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			want := []string{
				`printf '%s' '{"nftables":[{"delete":{"table":{"family":"inet","name":"a/../../../tmp/x"}}}]}' | nft -j -f -`,
				`printf '%s' '{"nftables":[{"delete":{"table":{"family":"ip","name":"x$(>pwnednft)"}}}]}' | nft -j -f -`,
			}
			if !slices.Equal(r.Apply, want) || r.Changes[1].Table != "x$(>pwnednft)" {
				t.Errorf("apply %q changes %+v", r.Apply, r.Changes)
			}
		}},
		{name: "built-in legacy tables: info with advice, no change", edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["iptable_filter"] = netconfig.ModuleBuiltin
			in.Config.Netfilter.Modules["iptable_raw"] = netconfig.ModuleBuiltin
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 0, "ipv4/raw": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Info || r.Kind != KindAdvice || len(r.Revert) != 0 || len(r.Changes) != 0 || r.Applicable() {
				t.Errorf("%v %v revert %q changes %+v", f.Severity, r.Kind, r.Revert, r.Changes)
			}
			if !strings.Contains(f.Title, "ipv4/filter, ipv4/raw") {
				t.Errorf("title %q", f.Title)
			}
			contains(t, "apply", r.Apply, "do not run iptables-legacy", "reboot", "new network namespace")
			contains(t, "evidence", f.Evidence, "6000 of 200000 profile samples")
		}},
		{name: "empty legacy raw table, module loaded", edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["iptable_raw"] = netconfig.ModuleLoaded
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 2, "ipv4/raw": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ip_tables stays: the filter table holds rules.
			if len(r.Changes) != 1 || !r.Changes[0].Equal(IptablesTableUnloadChange("ipv4", "raw")) || r.Changes[0].Module != "iptable_raw" ||
				!slices.Equal(r.Apply, []string{"modprobe -r iptable_raw"}) || !slices.Equal(r.Revert, []string{"modprobe iptable_raw"}) {
				t.Errorf("changes %+v apply %q revert %q", r.Changes, r.Apply, r.Revert)
			}
		}},
		{name: "empty raw and filter, one built in: the loaded one goes, the other is a caveat", edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["iptable_raw"] = netconfig.ModuleBuiltin
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 0, "ipv4/raw": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ip_tables stays: the built-in raw table still needs it.
			if r.Kind != KindSetting || len(r.Changes) != 1 || !r.Changes[0].Equal(IptablesTableUnloadChange("ipv4", "filter")) {
				t.Errorf("%v changes %+v", r.Kind, r.Changes)
			}
			contains(t, "caveats", r.Caveats, "ipv4/raw is built into the kernel", "Kernel modules are host-wide")
		}},
		{name: "ipv6 legacy filter table", edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["ip6table_filter"] = netconfig.ModuleLoaded
			in.Config.Netfilter.Modules["ip6_tables"] = netconfig.ModuleLoaded
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 1, "ipv6/filter": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			want := []Change{IptablesTableUnloadChange("ipv6", "filter"), ModuleUnloadChange("ip6_tables")}
			if !slices.EqualFunc(r.Changes, want, Change.Equal) || r.Changes[0].Module != "ip6table_filter" {
				t.Errorf("changes %+v", r.Changes)
			}
		}},
		{name: "filter table has rules", silent: true, edit: func(in *NetInput) { in.Config.Netfilter.RuleCounts["ipv4/filter"] = 3 }},
		{name: "rule counts unknown", silent: true, edit: func(in *NetInput) { in.Config.Netfilter.RuleCounts = nil }},
		{name: "cost below what the profile resolves", silent: true, edit: func(in *NetInput) {
			setGroup(in, "netfilter", 4, 200_000)
		}},
		{name: "4 samples over the threshold: undecided", edit: func(in *NetInput) {
			setGroup(in, "netfilter", 4, 200)
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Info || !strings.HasPrefix(f.Title, "undecided: ") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
		}},
	})
}

func TestRPFilter(t *testing.T) {
	runNetCases(t, "net.rp-filter", []netCase{
		{name: "strict via all", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ens1f0 is already 0: only "all" (effective = max) changes.
			wantApply := []string{"sysctl -w net.ipv4.conf.all.rp_filter=0", "sysctl -w net.ipv4.conf.all.accept_local=1"}
			wantRevert := []string{"sysctl -w net.ipv4.conf.all.accept_local=0", "sysctl -w net.ipv4.conf.all.rp_filter=1"}
			if !slices.Equal(r.Apply, wantApply) || !slices.Equal(r.Revert, wantRevert) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "caveats", r.Caveats, "Security trade-off", "spoofed source")
		}},
		{name: "loose on the interface too", edit: func(in *NetInput) { in.Config.RPFilter.RPFilter["ens1f0"] = 2 }, want: func(t *testing.T, f *Finding) {
			if !slices.Contains(f.Recommendation.Revert, "sysctl -w net.ipv4.conf.ens1f0.rp_filter=2") {
				t.Errorf("revert %q", f.Recommendation.Revert)
			}
		}},
		{name: "interface name with shell metacharacters and a dot", edit: func(in *NetInput) {
			in.Config.Interface.Name = "x$(a;b).1"
			in.Config.RPFilter.RPFilter = map[string]int64{"all": 0, "x$(a;b).1": 1}
			in.Config.RPFilter.AcceptLocal = map[string]int64{"all": 1}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Changes[0].Key != "net.ipv4.conf.x$(a;b)/1.rp_filter" || r.Apply[0] != "sysctl -w 'net.ipv4.conf.x$(a;b)/1.rp_filter=0'" {
				t.Errorf("changes %+v apply %q", r.Changes, r.Apply)
			}
			if segs := SysctlSegments(r.Changes[0].Key); segs[3] != "x$(a;b).1" {
				t.Errorf("segments %q", segs)
			}
		}},
		{name: "rp_filter off", silent: true, edit: func(in *NetInput) { zero := int64(0); in.Config.RPFilter.EffectiveRPFilter = &zero }},
		{name: "no CPU in fib validation", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[2].Share = 0 }},
	})
}

func TestAudit(t *testing.T) {
	runNetCases(t, "net.audit", []netCase{
		{name: "enabled", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindSetting || r.Apply[0] != "auditctl -e 0" || r.Revert[0] != "auditctl -e 1" || !r.Changes[0].Equal(AuditChange(1, 0)) {
				t.Errorf("%+v", r)
			}
		}},
		{name: "locked until reboot is advice", edit: func(in *NetInput) { two := uint32(2); in.Config.Audit.Enabled = &two }, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Revert) != 0 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "disabled", silent: true, edit: func(in *NetInput) { zero := uint32(0); in.Config.Audit.Enabled = &zero }},
		{name: "status unknown", silent: true, edit: func(in *NetInput) { in.Config.Audit.Enabled = nil }},
	})
}

func TestIPIdent(t *testing.T) {
	runNetCases(t, "net.ip-ident", []netCase{
		{name: "4.82%", want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindCode || !strings.Contains(f.Recommendation.Code[0].Code, "IP_PMTUDISC_DO") {
				t.Errorf("%+v", f.Recommendation)
			}
			contains(t, "caveats", f.Recommendation.Caveats, "EMSGSIZE")
		}},
		{name: "not in the profile", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups = in.Evidence.Profile.Groups[:4] }},
		{name: "no profile", silent: true, edit: func(in *NetInput) {
			in.Evidence.Profile = evidence.ProfileSection{Section: evidence.Section{Unavailable: "perf_event refused"}}
		}},
	})
}
