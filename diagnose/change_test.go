package diagnose

import (
	"errors"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
)

// TestConstructorsMakeValidChanges: every constructor's change passes the
// validation the revert-file reader applies, and renders a command.
func TestConstructorsMakeValidChanges(t *testing.T) {
	for _, tc := range []struct {
		c             Change
		apply, revert string
	}{
		{SysctlChange("net.core.netdev_budget", "300", "600"), "sysctl -w net.core.netdev_budget=600", "sysctl -w net.core.netdev_budget=300"},
		{SysctlChange("net.ipv4.udp_mem", "1\t2\t3", "4 5 6"), "sysctl -w 'net.ipv4.udp_mem=4 5 6'", "sysctl -w 'net.ipv4.udp_mem=1 2 3'"},
		{SysctlChange(SysctlKey("net", "ipv4", "conf", "eth0.100", "rp_filter"), "1", "0"), "sysctl -w net.ipv4.conf.eth0/100.rp_filter=0", ""},
		{QueueMaskChange("eth0", "rx", 3, cpuset.Set{}, cpuset.Of(1, 5), 8), "echo 22 > /sys/class/net/eth0/queues/rx-3/rps_cpus", "echo 0 > /sys/class/net/eth0/queues/rx-3/rps_cpus"},
		{QueueMaskChange("eth0", "tx", 0, cpuset.Of(0), cpuset.Of(1), 40), "echo 00,00000002 > /sys/class/net/eth0/queues/tx-0/xps_cpus", ""},
		{RPSFlowCntChange("eth0", 0, 0, 2048), "echo 2048 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt", ""},
		{SysctlChange("net.core.rps_sock_flow_entries", "0", "32768"), "sysctl -w net.core.rps_sock_flow_entries=32768", ""},
		{IRQAffinityChange(81, cpuset.Of(0), cpuset.Of(16), 40), "echo 00,00010000 > /proc/irq/81/smp_affinity", ""},
		{SMTControlChange("off", "on"), "echo on > /sys/devices/system/cpu/smt/control", ""},
		{EthtoolFeatureChange("eth0", "rx-gro", true, false), "ethtool -K eth0 rx-gro off", "ethtool -K eth0 rx-gro on"},
		{EthtoolRingChange("eth0", map[string]uint32{"rx": 512, "tx": 512}, map[string]uint32{"rx": 4096, "tx": 4096}), "ethtool -G eth0 rx 4096 tx 4096", ""},
		{EthtoolCoalesceChange("eth0", map[string]uint32{"rx-usecs": 3, "adaptive-rx": 1}, map[string]uint32{"rx-usecs": 50, "adaptive-rx": 0}), "ethtool -C eth0 rx-usecs 50 adaptive-rx off", "ethtool -C eth0 rx-usecs 3 adaptive-rx on"},
		{EthtoolChannelsChange("eth0", map[string]uint32{"combined": 4}, map[string]uint32{"combined": 8}), "ethtool -L eth0 combined 8", ""},
		{EthtoolRSSChange("eth0", []uint32{0, 0, 1, 2}, EqualTable(4, 4)), "ethtool -X eth0 equal 4", "ethtool -X eth0 weight 2 1 1   # same spread; perfscope writes the exact table"},
		{NftTableDeleteChange("inet", "filter"), "nft delete table inet filter", "# perfscope udp --revert recreates nft table inet filter from the description saved in its revert file"},
		{IptablesTableUnloadChange("ipv6", "filter"), "modprobe -r ip6table_filter", "modprobe ip6table_filter"},
		{ModuleUnloadChange("ip_tables"), "modprobe -r ip_tables", "modprobe ip_tables"},
		{ThreadAffinityChange(4300, cpuset.Range(0, 19), cpuset.Of(2)), "taskset -p -c 2 4300", "taskset -p -c 0-19 4300"},
		{AuditChange(1, 0), "auditctl -e 0", "auditctl -e 1"},
		{IrqbalanceBanChange("/etc/default/irqbalance", []string{"--hintpolicy=subset"}, []int{66, 65, 66}),
			`printf '%s\n' 'IRQBALANCE_ARGS="--hintpolicy=subset --banirq=65 --banirq=66"' >> /etc/default/irqbalance   # then: systemctl restart irqbalance`, ""},
		{NAPISettingsChange("eth0", napiQueue3, 8200, map[string]uint64{"gro-flush-timeout": 0, "defer-hard-irqs": 0}, map[string]uint64{"defer-hard-irqs": 2, "gro-flush-timeout": 200000}),
			`ynl --family netdev --do napi-set --json '{"id": 8200, "defer-hard-irqs": 2, "gro-flush-timeout": 200000}'   # NAPI instance of eth0 rx-3`,
			`ynl --family netdev --do napi-set --json '{"id": 8200, "defer-hard-irqs": 0, "gro-flush-timeout": 0}'   # NAPI instance of eth0 rx-3`},
		{NAPISettingsChange("eth0", nil, 8193, map[string]uint64{"irq-suspend-timeout": 0}, map[string]uint64{"irq-suspend-timeout": 20000000}),
			`ynl --family netdev --do napi-set --json '{"id": 8193, "irq-suspend-timeout": 20000000}'   # NAPI instance of eth0`, ""},
		{NAPISettingsChange("eth0", nil, 8193, map[string]uint64{"threaded": 0}, map[string]uint64{"threaded": 1}),
			`ynl --family netdev --do napi-set --json '{"id": 8193, "threaded": "enabled"}'   # NAPI instance of eth0`,
			`ynl --family netdev --do napi-set --json '{"id": 8193, "threaded": "disabled"}'   # NAPI instance of eth0`},
	} {
		if err := tc.c.Validate(); err != nil {
			t.Errorf("%+v: %v", tc.c, err)
		}
		if got := tc.c.Command(tc.c.New); got != tc.apply {
			t.Errorf("apply %s, want %s", got, tc.apply)
		}
		if got := tc.c.Command(tc.c.Old); tc.revert != "" && got != tc.revert {
			t.Errorf("revert %s, want %s", got, tc.revert)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	ok := EthtoolFeatureChange("eth0", "rx-gro", true, false)
	for name, c := range map[string]Change{
		"sysctl outside net":      SysctlChange("kernel.core_pattern", "core", "|/tmp/x"),
		"sysctl traversal":        SysctlChange("net.ipv4.conf.....rp_filter", "1", "0"),
		"sysctl value with a LF":  SysctlChange("net.core.rmem_max", "1", "2\nkernel.x=1")._withNew("2\nkernel.x=1"),
		"path outside the list":   {Kind: ChangeSysfs, Path: "/etc/passwd", Old: "0", New: "1"},
		"path traversal":          {Kind: ChangeSysfs, Path: "/sys/class/net/../../etc/queues/rx-0/rps_cpus", Iface: "..", Old: "0", New: "1"},
		"iface with a slash":      EthtoolFeatureChange("a/b", "rx-gro", true, false),
		"iface too long":          EthtoolFeatureChange("x$(touch${IFS}f)", "rx-gro", true, false),
		"mask not hex":            {Kind: ChangeSysfs, Path: "/proc/irq/1/smp_affinity", Old: "0", New: "$(id)"},
		"field of another kind":   func() Change { c := ok; c.Path = "/etc/x"; return c }(),
		"audit lock":              AuditChange(1, 2),
		"nft name with NUL":       NftTableDeleteChange("ip", "a\x00b"),
		"nft unknown family":      NftTableDeleteChange("ipx", "t"),
		"nft restore direction":   func() Change { c := NftTableDeleteChange("ip", "t"); c.Old, c.New = c.New, c.Old; return c }(),
		"iptables module spoofed": func() Change { c := IptablesTableUnloadChange("ipv4", "filter"); c.Module = "evil"; return c }(),
		"module name":             ModuleUnloadChange("../evil"),
		"thread empty set":        ThreadAffinityChange(10, cpuset.Of(0), cpuset.Set{}),
		"irqbalance other file":   IrqbalanceBanChange("/etc/profile", nil, []int{1}),
		"irqbalance quote in arg": IrqbalanceBanChange("/etc/default/irqbalance", []string{`x"; rm -rf /`}, []int{1}),
		"params differ":           EthtoolRingChange("eth0", map[string]uint32{"rx": 1}, map[string]uint32{"tx": 2}),
		"rss sizes differ":        EthtoolRSSChange("eth0", []uint32{0, 1}, []uint32{0, 1, 2}),
		"unknown kind":            {Kind: "shell", Old: "a", New: "b"},
		"napi without an id":      NAPISettingsChange("eth0", nil, 0, napiZero, napiSet),
		"napi defer over S32_MAX": NAPISettingsChange("eth0", nil, 8193, map[string]uint64{"defer-hard-irqs": 0}, map[string]uint64{"defer-hard-irqs": 1 << 31}),
		"napi unknown setting":    {Kind: ChangeNAPI, Iface: "eth0", NAPIID: 8193, Old: "prefer-busy-poll=0", New: "prefer-busy-poll=1"},
		"napi threaded 3":         {Kind: ChangeNAPI, Iface: "eth0", NAPIID: 8193, Old: "threaded=0", New: "threaded=3"},
		"napi settings differ":    NAPISettingsChange("eth0", nil, 8193, map[string]uint64{"defer-hard-irqs": 0}, map[string]uint64{"gro-flush-timeout": 1}),
		"napi setting twice":      {Kind: ChangeNAPI, Iface: "eth0", NAPIID: 8193, Old: "defer-hard-irqs=0 defer-hard-irqs=0", New: "defer-hard-irqs=1 defer-hard-irqs=1"},
		"napi negative queue":     NAPISettingsChange("eth0", func() *int { q := -1; return &q }(), 8193, napiZero, napiSet),
		"napi bad iface":          NAPISettingsChange("a/b", nil, 8193, napiZero, napiSet),
		"napi id on a sysctl":     func() Change { c := SysctlChange("net.core.netdev_budget", "300", "600"); c.NAPIID = 8193; return c }(),
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidChange) {
			t.Errorf("%s: %+v validated (%v)", name, c, err)
		}
	}
}

func (c Change) _withNew(v string) Change { c.New = v; return c }

var (
	napiQueue3 = func() *int { q := 3; return &q }()
	napiZero   = map[string]uint64{"defer-hard-irqs": 0, "gro-flush-timeout": 0}
	napiSet    = map[string]uint64{"defer-hard-irqs": 2, "gro-flush-timeout": 200000}
)

// TestCommandsQuoteHostileNames: every variable word of a rendered command
// is one literal shell word.
func TestCommandsQuoteHostileNames(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{EthtoolFeatureChange("v$(>pwned)", "rx-gro", true, false), "ethtool -K 'v$(>pwned)' rx-gro off"},
		{EthtoolFeatureChange("q'\";|`id`", "rx-gro", true, false), "ethtool -K 'q'\\''\";|`id`' rx-gro off"},
		{QueueMaskChange("a;b", "rx", 0, cpuset.Set{}, cpuset.Of(0), 0), "echo 1 > '/sys/class/net/a;b/queues/rx-0/rps_cpus'"},
		{SysctlChange(SysctlKey("net", "ipv4", "conf", "a|b", "rp_filter"), "1", "0"), "sysctl -w 'net.ipv4.conf.a|b.rp_filter=0'"},
		{NftTableDeleteChange("ip", "x$(>pwnednft)"), `printf '%s' '{"nftables":[{"delete":{"table":{"family":"ip","name":"x$(>pwnednft)"}}}]}' | nft -j -f -`},
		{NftTableDeleteChange("ip", "it's\n"), `printf '%s' '{"nftables":[{"delete":{"table":{"family":"ip","name":"it'\''s\u000a"}}}]}' | nft -j -f -`},
		{NftTableDeleteChange("ip", "bad\xff"), `# nft table $'bad\xff' has a name no nft command can spell (not UTF-8); perfscope deletes it through netlink`},
	} {
		if err := tc.c.Validate(); err != nil {
			t.Fatal(err)
		}
		if got := tc.c.Command(tc.c.New); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if strings.ContainsAny(tc.c.Command(tc.c.New), "\n\x1b") {
			t.Errorf("multi-line rendition %q", tc.c.Command(tc.c.New))
		}
	}
}

func TestSysctlKeyRoundTrip(t *testing.T) {
	key := SysctlKey("net", "ipv4", "conf", "eth0.100", "rp_filter")
	if key != "net.ipv4.conf.eth0/100.rp_filter" || strings.Join(SysctlSegments(key), "|") != "net|ipv4|conf|eth0.100|rp_filter" {
		t.Errorf("%s %q", key, SysctlSegments(key))
	}
}

func TestRecommendationApplicable(t *testing.T) {
	var r Recommendation
	r.Kind = KindSetting
	r.Apply = []string{"sysctl -w net.core.rmem_max=1"}
	if r.Applicable() {
		t.Error("a setting with command strings only is applicable")
	}
	r.AddChanges(AuditChange(1, 0), SysctlChange("net.core.rmem_max", "1", "2"))
	if !r.Applicable() || r.Revert[0] != "sysctl -w net.core.rmem_max=1" || r.Revert[1] != "auditctl -e 1" {
		t.Errorf("%+v", r)
	}
}
