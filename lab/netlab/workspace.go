package netlab

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/collectors/procfs"
)

// Interrupted says where a lab run stopped when it was interrupted: the
// scenario it was in (whose namespaces were removed) and those not run.
type Interrupted struct {
	During string
	NotRun []string
}

// Sentence says that lab (its command) was interrupted here, after
// finished scenarios: which scenario's namespaces were removed, and the
// scenarios not run.
func (i *Interrupted) Sentence(lab string, finished int) string {
	return fmt.Sprintf("%s interrupted during %s, whose namespaces were removed; %d of %d scenarios finished, not run: %s",
		lab, i.During, finished, finished+len(i.NotRun), strings.Join(i.NotRun, ", "))
}

// Privileged checks what every network lab needs before it starts: root,
// and CAP_SYS_ADMIN and CAP_NET_ADMIN for namespaces, veths and the probes
// — said up front, rather than failing in `ip netns add`. The sentence
// names lab.
func Privileged(lab string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root: it creates network namespaces and loads eBPF probes (run it with sudo)", lab)
	}
	if st, err := procfs.Default.Status(os.Getpid()); err == nil && (!st.Capable(procfs.CapSysAdmin) || !st.Capable(procfs.CapNetAdmin)) {
		return fmt.Errorf("%s creates network namespaces and loads BPF probes: it needs CAP_SYS_ADMIN and CAP_NET_ADMIN (run as root)", lab)
	}
	return nil
}

// Workspace prepares a network lab's run: the perfscope binary it runs in
// its namespaces, what killed labs left removed first (namespaces,
// reports, their directories; labs whose process still runs are left
// alone, and log says what was removed), and a private directory claimed
// by this process. done releases the claim and, unless keep, removes the
// directory.
func Workspace(lab string, keep bool, log io.Writer) (bin, dir string, done func(), err error) {
	bin, err = os.Executable()
	if err != nil {
		return "", "", nil, fmt.Errorf("%s: find the perfscope binary: %w", lab, err)
	}
	stale, err := RemoveStale()
	for _, s := range stale {
		fmt.Fprintf(log, "removed what lab process %d (no longer running) left: %s\n", s.OwnerPID, strings.Join(append(s.Namespaces, s.Dirs...), " "))
	}
	if err != nil {
		fmt.Fprintf(log, "warning: %v\n", err)
	}
	dir, err = safeio.MkdirTemp("perfscope-" + strings.ReplaceAll(lab, " ", "-") + "-")
	if err != nil {
		return "", "", nil, err
	}
	claim, err := NewClaim(nil, []string{dir})
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

// Select is the scenarios of all (named by name) that names names, in
// the order given; none named is all. An unknown name is the user's to
// correct: the sentence names the flag and lists the scenarios.
func Select[S any](names []string, all []S, name func(S) string) ([]S, error) {
	if len(names) == 0 {
		return all, nil
	}
	byName := map[string]S{}
	var known []string
	for _, s := range all {
		byName[name(s)] = s
		known = append(known, name(s))
	}
	var out []S
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("--scenario %q: unknown; the scenarios are %s", n, strings.Join(known, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}
