package diagnose

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// shapesMade records which declared shapes (rule ID, index in
// Rule.Changes) the rules' table tests made a change of.
var shapesMade = struct {
	sync.Mutex
	m map[string]map[int]bool
}{m: map[string]map[int]bool{}}

// checkDeclared fails t when rule r made a change that has none of the
// shapes it declares, and records the shapes made.
func checkDeclared(t *testing.T, r Rule[NetInput], in NetInput, changes []Change) {
	t.Helper()
	iface := in.Evidence.Interface.Name // the run's interface
	if in.Config != nil {
		iface = in.Config.Interface.Name
	}
	checkShapes(t, r.ID, r.Changes, iface, changes)
}

// checkShapes is checkDeclared for a rule of any family: id declares
// shapes; iface is the run's interface.
func checkShapes(t *testing.T, id string, shapes []ChangeShape, iface string, changes []Change) {
	t.Helper()
	r := struct {
		ID      string
		Changes []ChangeShape
	}{id, shapes}
	shapesMade.Lock()
	defer shapesMade.Unlock()
	for _, c := range changes {
		if err := Allowed(r.Changes, c, iface); err != nil {
			t.Errorf("%s made a change it does not declare: %v", r.ID, err)
		}
		for i, s := range r.Changes {
			if s.Matches(c, iface) {
				if shapesMade.m[r.ID] == nil {
					shapesMade.m[r.ID] = map[int]bool{}
				}
				shapesMade.m[r.ID][i] = true
			}
		}
	}
}

// TestMain checks, after a run of every test, that each shape a rule
// declares was made by one of its table cases: a declaration wider than
// the rule would let a revert file ask for what no rule does.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		var missing []string
		declared := map[string][]ChangeShape{}
		for _, r := range NetRules {
			declared[r.ID] = r.Changes
		}
		for _, r := range TCPRules {
			declared[r.ID] = r.Changes
		}
		for id, shapes := range declared {
			for i, s := range shapes {
				if !shapesMade.m[id][i] {
					missing = append(missing, fmt.Sprintf("%s: %s", id, s))
				}
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "declared change shapes no table case makes:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// A revert file edited to ask for what the finding's rule never does is
// refused: another sysctl, another interface, another value.
func TestAllowedRefusesWhatTheRuleDoesNot(t *testing.T) {
	rp, _ := NetChangeShapes("net.rp-filter")
	for _, tc := range []struct {
		name  string
		c     Change
		iface string
		ok    bool
	}{
		{"rp_filter of the run's interface", SysctlChange("net.ipv4.conf.eth0.rp_filter", "1", "0"), "eth0", true},
		{"rp_filter of all", SysctlChange("net.ipv4.conf.all.rp_filter", "2", "0"), "eth0", true},
		{"accept_local", SysctlChange("net.ipv4.conf.all.accept_local", "0", "1"), "eth0", true},
		{"VLAN interface in the key's form", SysctlChange(SysctlKey("net", "ipv4", "conf", "eth0.100", "rp_filter"), "1", "0"), "eth0.100", true},
		{"ip_forward", SysctlChange("net.ipv4.ip_forward", "1", "0"), "eth0", false},
		{"tcp_syncookies", SysctlChange("net.ipv4.tcp_syncookies", "0", "1"), "eth0", false},
		{"another interface", SysctlChange("net.ipv4.conf.eth1.rp_filter", "1", "0"), "eth0", false},
		{"rp_filter of default", SysctlChange("net.ipv4.conf.default.rp_filter", "1", "0"), "eth0", false},
		{"a regexp in the interface name", SysctlChange("net.ipv4.conf.ethX.rp_filter", "1", "0"), "eth.", false},
		{"set to 1 instead of off", SysctlChange("net.ipv4.conf.all.rp_filter", "0", "1"), "eth0", false},
		{"restore to 7", SysctlChange("net.ipv4.conf.all.rp_filter", "7", "0"), "eth0", false},
		{"a run without an interface", SysctlChange("net.ipv4.conf.eth0.rp_filter", "1", "0"), "", false},
		{"another kind", AuditChange(1, 0), "eth0", false},
	} {
		err := Allowed(rp, tc.c, tc.iface)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidChange)) {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	nf, _ := NetChangeShapes("net.netfilter-unused")
	for _, tc := range []struct {
		c  Change
		ok bool
	}{
		{ModuleUnloadChange("ip_tables"), true},
		{ModuleUnloadChange("ip6_tables"), true},
		{ModuleUnloadChange("nf_conntrack"), false},
		{IptablesTableUnloadChange("ipv6", "raw"), true},
		{IptablesTableUnloadChange("ipv4", "nat"), false},
		{NftTableDeleteChange("inet", "a b\nc"), true},
	} {
		if err := Allowed(nf, tc.c, "eth0"); (err == nil) != tc.ok {
			t.Errorf("%s %s: %v, want ok=%v", tc.c.Kind, tc.c.Target(), err, tc.ok)
		}
	}
	if err := Allowed(nil, AuditChange(1, 0), "eth0"); err == nil || !strings.Contains(err.Error(), "makes no changes") {
		t.Errorf("a rule without changes: %v", err)
	}
	if _, ok := NetChangeShapes("net.no-such-rule"); ok {
		t.Error("an unknown rule has shapes")
	}
}
