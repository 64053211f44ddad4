package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/lab/netlab"
)

// labPrivileged checks what every network lab needs before it starts:
// root, and CAP_SYS_ADMIN and CAP_NET_ADMIN for namespaces, veths and the
// probes — said up front (exit 3) rather than failing in `ip netns add`
// (exit 4).
func labPrivileged(lab string) error {
	if os.Geteuid() != 0 {
		return unavailableError("%s needs root: it creates network namespaces and loads eBPF probes (run it with sudo)", lab)
	}
	if st, err := procfs.Default.Status(os.Getpid()); err == nil && (!st.Capable(procfs.CapSysAdmin) || !st.Capable(procfs.CapNetAdmin)) {
		return unavailableError("%s creates network namespaces and loads BPF probes: it needs CAP_SYS_ADMIN and CAP_NET_ADMIN (run as root)", lab)
	}
	return nil
}

// labWorkspace prepares a network lab's run: the perfscope binary it runs
// in its namespaces, what killed labs left removed first (namespaces,
// reports, their directories; labs whose process still runs are left
// alone), and a private directory claimed by this process. done releases
// the claim and, unless keep, removes the directory.
func labWorkspace(g *Globals, lab string, keep bool) (bin, dir string, done func(), err error) {
	bin, err = os.Executable()
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: find the perfscope binary: %w", lab, err)
	}
	stale, err := netlab.RemoveStale()
	for _, s := range stale {
		fmt.Fprintf(g.Err, "removed what lab process %d (no longer running) left: %s\n", s.OwnerPID, strings.Join(append(s.Namespaces, s.Dirs...), " "))
	}
	if err != nil {
		fmt.Fprintf(g.Err, "warning: %v\n", err)
	}
	dir, err = safeio.MkdirTemp("perfscope-" + strings.ReplaceAll(lab, " ", "-") + "-")
	if err != nil {
		return "", "", nil, err
	}
	claim, err := netlab.NewClaim(nil, []string{dir})
	if err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	return bin, dir, func() {
		if !keep {
			os.RemoveAll(dir)
		}
		claim.Release()
	}, nil
}
