package netconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// rp_filter of a VLAN (a dotted interface name) is read, so the rule that
// needs it is not silent on VLANs.
func TestSourceValidationOfVLAN(t *testing.T) {
	root := t.TempDir()
	for scope, v := range map[string]string{"all": "0", "default": "1", "eth0.100": "2"} {
		d := filepath.Join(root, "proc/sys/net/ipv4/conf", scope)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "rp_filter"), []byte(v+"\n"), 0o644)
	}
	sv := Sources{FS: procfs.FS{Root: root}}.sourceValidation("eth0.100")
	if sv.RPFilter["eth0.100"] != 2 || sv.EffectiveRPFilter == nil || *sv.EffectiveRPFilter != 2 {
		t.Errorf("VLAN rp_filter = %+v (effective %v)", sv.RPFilter, sv.EffectiveRPFilter)
	}
}
