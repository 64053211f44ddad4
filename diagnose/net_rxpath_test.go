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
			if f.Severity != Warn || r.Apply[0] != "ethtool -K ens1f0 gro off" || r.Revert[0] != "ethtool -K ens1f0 gro on" {
				t.Errorf("%v %q %q", f.Severity, r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "3680000 UDP datagrams of 3680000 packets")
			contains(t, "caveats", r.Caveats, "TCP receivers", "VM hosts")
		}},
		{name: "TCP traffic too", silent: true, edit: func(in *NetInput) { in.Evidence.Drops.UDPSNMP.UDP.InDatagrams = 100 }},
		{name: "GRO off", silent: true, edit: func(in *NetInput) { off := false; in.Config.Offloads.GRO = &off }},
		{name: "GRO cheap", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[0].Share = 0.002 }},
	})
}

func TestNetfilterUnused(t *testing.T) {
	runNetCases(t, "net.netfilter-unused", []netCase{
		{name: "empty filter table, nat in use", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			// ip_tables stays: the nat table has a rule.
			if !slices.Equal(r.Apply, []string{"modprobe -r iptable_filter"}) || !slices.Equal(r.Revert, []string{"modprobe iptable_filter"}) {
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
			if r.Apply[0] != "nft list table ip filter > /var/tmp/perfscope-nft-ip-filter.nft && nft delete table ip filter" || r.Revert[0] != "nft -f /var/tmp/perfscope-nft-ip-filter.nft" {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "built-in legacy tables: info with advice", edit: func(in *NetInput) {
			in.Config.Netfilter.Modules["iptable_filter"] = netconfig.ModuleBuiltin
			in.Config.Netfilter.Modules["iptable_raw"] = netconfig.ModuleBuiltin
			in.Config.Netfilter.RuleCounts = map[string]int{"ipv4/filter": 0, "ipv4/raw": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if f.Severity != Info || r.Kind != KindAdvice || len(r.Revert) != 0 {
				t.Errorf("%v %v revert %q", f.Severity, r.Kind, r.Revert)
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
			if !slices.Equal(r.Apply, []string{"modprobe -r iptable_raw"}) || !slices.Equal(r.Revert, []string{"modprobe iptable_raw"}) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
		}},
		{name: "a table name read from the system is quoted", edit: func(in *NetInput) {
			in.Config.Netfilter.RuleCounts = map[string]int{"nft/inet/x;reboot": 0}
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Apply[0] != "nft list table inet 'x;reboot' > '/var/tmp/perfscope-nft-inet-x;reboot.nft' && nft delete table inet 'x;reboot'" {
				t.Errorf("apply %q", r.Apply)
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
			wantRevert := []string{"sysctl -w net.ipv4.conf.all.rp_filter=1", "sysctl -w net.ipv4.conf.all.accept_local=0"}
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
		{name: "rp_filter off", silent: true, edit: func(in *NetInput) { zero := int64(0); in.Config.RPFilter.EffectiveRPFilter = &zero }},
		{name: "no CPU in fib validation", silent: true, edit: func(in *NetInput) { in.Evidence.Profile.Groups[2].Share = 0 }},
	})
}

func TestAudit(t *testing.T) {
	runNetCases(t, "net.audit", []netCase{
		{name: "enabled", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindSetting || r.Apply[0] != "auditctl -e 0" || r.Revert[0] != "auditctl -e 1" {
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
