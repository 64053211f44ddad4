// Package testutil holds helpers shared by perfscope's tests.
package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/probes"
)

// RequireRoot skips t unless it runs as root. With
// PERFSCOPE_REQUIRE_ROOT_TESTS=1 (CI) a root test that cannot run fails
// instead, so a missing privilege can never pass silently.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("PERFSCOPE_REQUIRE_ROOT_TESTS") == "1" {
		t.Fatal("root test cannot run: not root, and PERFSCOPE_REQUIRE_ROOT_TESTS=1")
	}
	t.Skip("needs root")
}

// RequireTool is the path of a program a root test drives (a server or a
// load tool from the distribution's packages), installed by
// scripts/deps.sh: missing, t skips with how to install it, or fails with
// PERFSCOPE_REQUIRE_ROOT_TESTS=1 (CI), where the test must run.
func RequireTool(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("PERFSCOPE_REQUIRE_ROOT_TESTS") == "1" {
		t.Fatalf("%s is needed (%s): %v", name, install, err)
	}
	t.Skipf("%s is not installed (%s)", name, install)
	return ""
}

// GCLogCorpus is the directory of the GC log corpus tier:
// ../shared/gclogs-corpus beside the repository, about 500 real GC logs
// from other projects' test data with two established analysers' pause
// counts (PEERS.tsv). A plain clone has no ../shared, so t skips with one
// line; with PERFSCOPE_REQUIRE_CORPUS=1 (CI, which has shared/ beside its
// clone) a missing corpus fails t instead, so the tier can never pass
// silently. The testdata copies of representative logs run everywhere.
func GCLogCorpus(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "..", "shared", "gclogs-corpus")
	if _, err := os.Stat(filepath.Join(dir, "PEERS.tsv")); err != nil {
		if os.Getenv("PERFSCOPE_REQUIRE_CORPUS") == "1" {
			t.Fatalf("the GC log corpus is missing and PERFSCOPE_REQUIRE_CORPUS=1: %v", err)
		}
		t.Skipf("GC log corpus tier skipped: no %s beside this clone (PERFSCOPE_REQUIRE_CORPUS=1 makes it required, as in CI)", filepath.Clean(dir))
	}
	return dir
}

// LockBPF serialises root tests across test binaries (go test runs packages
// in parallel). Tests that load BPF, flood the network or count BPF objects
// system-wide would otherwise see each other's programs and traffic.
func LockBPF(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "perfscope-root-tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("open test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("take test lock: %v", err)
	}
	t.Cleanup(func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	})
}

// RepoRoot is the repository's top directory, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BPFProgramIDs is the set of BPF program ids loaded right now, but
// those of the programs named in except.
func BPFProgramIDs(t testing.TB, except ...string) map[uint32]bool {
	t.Helper()
	progs, err := probes.LoadedPrograms()
	if err != nil {
		t.Fatalf("list BPF programs: %v", err)
	}
	ids := map[uint32]bool{}
	for _, p := range progs {
		if !slices.Contains(except, p.Name) {
			ids[p.ID] = true
		}
	}
	return ids
}

// BPFMapIDs is the set of BPF map ids alive right now.
func BPFMapIDs(t testing.TB) map[uint32]bool {
	t.Helper()
	maps, err := probes.LoadedMapIDs()
	if err != nil {
		t.Fatalf("list BPF maps: %v", err)
	}
	ids := map[uint32]bool{}
	for _, id := range maps {
		ids[id] = true
	}
	return ids
}

// AssertNoNewBPF fails t if BPF programs or maps that were not in
// beforeProgs/beforeMaps are still alive. The kernel frees programs of
// released tp_btf/raw_tp links from a deferred work item, so the check polls
// for up to five seconds before it reports what remains. Programs of a
// type perfscope never loads, and their maps, are another program's
// (systemd loads cgroup programs when a unit starts) and not counted.
func AssertNoNewBPF(t testing.TB, beforeProgs, beforeMaps map[uint32]bool) {
	t.Helper()
	var leftProgs, leftMaps []uint32
	for i := 0; i < 50; i++ {
		leftProgs, leftMaps = nil, nil
		progs, err := probes.LoadedPrograms()
		if err != nil {
			t.Fatalf("list BPF programs: %v", err)
		}
		foreign := map[uint32]bool{}
		for _, p := range progs {
			switch {
			case p.Foreign:
				for _, m := range p.Maps {
					foreign[m] = true
				}
			case !beforeProgs[p.ID]:
				leftProgs = append(leftProgs, p.ID)
			}
		}
		for id := range BPFMapIDs(t) {
			if !beforeMaps[id] && !foreign[id] {
				leftMaps = append(leftMaps, id)
			}
		}
		if len(leftProgs) == 0 && len(leftMaps) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind: BPF programs %v, maps %v", leftProgs, leftMaps)
}
