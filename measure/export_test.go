package measure

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// What the external tests (package measure_test, which replay recorded
// runs through measure/replay) reach inside the package.
var (
	SummarizeProfile = summarizeProfile
	ProfileSplit     = profileSplit
	CopyTree         = copyTree
)

// SampleNow is one tick of the TCP part's sampler.
func (p *TCP) SampleNow() { p.sample() }

// SetSynBudget sets the share of a CPU the SYN-queue reads may take: a
// huge one reads them at every sample, a tiny one at the first only.
func (p *TCP) SetSynBudget(share float64) { p.synBudget = share }

// Replace gives the profile part a symbolizer and a profile read.
func (p *Profile) Replace(sym *symbols.Symbolizer, prof cpuprofile.Profile) {
	p.sym, p.profile = sym, prof
}

// copyTree copies a fixture directory, symlinks as symlinks.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, dst)
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// WorkloadHost is workloadHost's processes for the external tests: 200
// in pod PodA's container holding socket 1111, 300 nginx on the host
// holding 2222, 400 in another pod (3333), 401 in a Docker container
// (3334).
func WorkloadHost(t *testing.T) Sources {
	src, _ := workloadHost(t)
	return src
}

// PodA is the pod of WorkloadHost's process 200.
const PodA = podA

// FindableListeners exports findableListeners.
var FindableListeners = findableListeners

// NewNetParts are the parts of a udp-rx run, built by hand for the tests
// that replay one: every network probe, the lock part taking 1 in
// lockStacks stacks, and a profile at profileHz (0: none).
func NewNetParts(o NetOptions, lockStacks, profileHz int) *NetParts {
	n := &NetParts{
		// The udp report does not use raise→entry latency; skipping its
		// tracepoint saves one BPF run per NET_RX raise (~100 ns per
		// datagram on a loopback flood).
		Softirq:   NewSoftirq(SoftirqOptions{Method: o.Method, NoLatency: true}),
		Queues:    NewQueues(QueueOptions{Method: o.Method, Iface: o.Iface}),
		Locks:     NewLocks(LockOptions{Method: o.Method, StackEvery: lockStacks}),
		Counters:  NewNetCounters(NetCounterOptions{Iface: o.Iface.Name, Ifindex: o.Iface.Index}),
		NoProfile: "on-CPU profile: disabled with --no-profile",
	}
	n.add(udpdrop.Spec.Name, NewDrops(DropOptions{Method: o.Method, Port: o.Port, PID: o.PID}))
	n.add(udpsock.Spec.Name, NewSocketReads(SocketOptions{Method: o.Method, Port: o.Port, PID: o.PID}))
	if profileHz > 0 {
		// Every CPU, kernel and user stacks, rooted at the CPU so the
		// profile splits by it.
		// NET_RX on a real NIC runs mostly from irq_exit on idle CPUs:
		// keep those samples of the idle task, drop only its loop.
		n.Profile = NewProfile(ProfileOptions{Frequency: profileHz, Root: cpuprofile.RootCPU, KeepIdleInterrupts: true,
			StackEntries: cpuprofile.DefaultStackEntries})
	}
	return n
}
