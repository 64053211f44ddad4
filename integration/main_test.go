// Package integration drives the built perfscope binary against labs on
// this machine (loopback floods, network namespaces, sample JVMs) and
// asserts on its JSON. Every test here needs root.
package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// TestMain removes the binary built for the run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(floodHelperEnv); spec != "" {
		os.Exit(floodHelperMain(spec))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// Perfscope builds the binary once per test run (static, like a release)
// and returns its path.
func Perfscope(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "perfscope-integration-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "perfscope")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/perfscope")
		cmd.Dir = testutil.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build perfscope: %v\n%s", buildErr, binPath)
	}
	return binPath
}
