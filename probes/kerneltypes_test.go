package probes_test

import (
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// btfMappings counts this process's mappings of the kernel's BTF: each
// decode maps /sys/kernel/btf/vmlinux anew and unmaps it only when the
// garbage collector frees the decoded types.
func btfMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/sys/kernel/btf/vmlinux")
}

// The kernel's BTF is decoded once per process: probes loaded after the
// first reuse it (their tp_btf targets, their hook checks, udpdrop's drop
// reasons) instead of each decoding /sys/kernel/btf/vmlinux again — twice
// per probe, three times for udpdrop, a sixth of a short run's CPU.
func TestKernelBTFDecodedOnce(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	// No collection while counting: it would unmap what the probes'
	// decodes mapped.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if _, err := probes.KernelTypes(); err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	before := btfMappings(t)
	s, err := softirq.Open(softirq.Options{Method: probes.MethodBTF})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	d, err := udpdrop.Open(udpdrop.Options{Method: probes.MethodBTF})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if n := btfMappings(t) - before; n != 0 {
		t.Errorf("loading two tp_btf probes mapped the kernel's BTF %d more times: they decoded it again", n)
	}
	a, _ := probes.KernelTypes()
	b, _ := probes.KernelTypes()
	if a != b {
		t.Error("KernelTypes returned two specs")
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// On a kernel that allocates map elements safely from any context (6.1+),
// the probes' per-CPU hashes allocate on insert: creating them
// preallocated cost every CPU max_entries values at each start. The
// probes' own tests show they still count (udpsock's overflow hash
// included); here, that their maps are created so.
func TestPerCPUHashesAllocateOnInsert(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	s, err := udpsock.Open(udpsock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	perCPUHashes := 0
	for name, m := range s.Maps() {
		if m.Type() != ebpf.PerCPUHash {
			continue
		}
		perCPUHashes++
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Flags&unix.BPF_F_NO_PREALLOC == 0 {
			t.Errorf("%s: a per-CPU hash created preallocated (flags %#x)", name, info.Flags)
		}
	}
	if perCPUHashes == 0 {
		t.Fatal("udpsock has no per-CPU hash")
	}
	s.Close()
	testutil.AssertNoNewBPF(t, progs, maps)
}
