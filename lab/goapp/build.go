// Package goapp builds perfscope's Go lab service (server/) with the Go
// toolchains a machine has, in the shapes Go programs are shipped in:
// stripped or not, PIE or not, static or cgo. The tests of package golang
// read the binaries' function tables; the root tests run them, drive load
// and compare perfscope's measurement with what the service's runtime
// reports about itself.
package goapp

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

//go:embed server/*.go
var serverSource embed.FS

// Toolchain is a Go toolchain: Version is the release ("go1.19.8"), Go
// the go command and Env what it needs (GOTOOLCHAIN for the module
// proxy's toolchains).
type Toolchain struct {
	Version string
	Go      string
	Env     []string
}

// DebianGo is where Debian's golang-go (Go 1.19 on bookworm) lives; it is
// installed beside the current toolchain without becoming the default go.
const DebianGo = "/usr/lib/go-1.19/bin/go"

// ProxyReleases are the releases between Debian's and the current one that
// tests build with through the Go module proxy (GOTOOLCHAIN), the latest
// patch of each as of writing. scripts/deps.sh fetches them.
var ProxyReleases = []string{"go1.20.14", "go1.21.13", "go1.22.12", "go1.23.12", "go1.24.13", "go1.25.9"}

// Debian is Debian's Go 1.19, if installed.
func Debian() (Toolchain, bool) {
	if _, err := os.Stat(DebianGo); err != nil {
		return Toolchain{}, false
	}
	return Toolchain{Version: "go1.19", Go: DebianGo, Env: []string{"GOTOOLCHAIN=local"}}, true
}

// Current is the go command on PATH, as the repository builds with.
func Current() (Toolchain, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return Toolchain{}, err
	}
	out, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return Toolchain{}, fmt.Errorf("go env GOVERSION: %w", err)
	}
	return Toolchain{Version: strings.TrimSpace(string(out)), Go: goCmd, Env: []string{"GOTOOLCHAIN=local"}}, nil
}

// Proxy is release fetched through the module proxy by the current go
// command.
func Proxy(release string) (Toolchain, error) {
	cur, err := Current()
	if err != nil {
		return Toolchain{}, err
	}
	return Toolchain{Version: release, Go: cur.Go, Env: []string{"GOTOOLCHAIN=" + release}}, nil
}

// Variant is one shape of binary.
type Variant struct {
	// Stripped links with -ldflags=-s -w: no symbol table, no DWARF.
	Stripped bool
	// PIE builds with -buildmode=pie.
	PIE bool
	// Cgo builds with CGO_ENABLED=1 (net's cgo resolver: a binary linked
	// against libc); otherwise CGO_ENABLED=0, a static binary.
	Cgo bool
	// NoProfile leaves runtime/pprof out, so the linker turns the
	// runtime's allocation sampling off.
	NoProfile bool
}

func (v Variant) String() string {
	var s []string
	for _, f := range []struct {
		on   bool
		name string
	}{{v.Stripped, "stripped"}, {v.PIE, "pie"}, {v.Cgo, "cgo"}, {v.NoProfile, "noprofile"}} {
		if f.on {
			s = append(s, f.name)
		}
	}
	if len(s) == 0 {
		return "plain"
	}
	return strings.Join(s, "-")
}

var buildMu sync.Mutex

// Build builds the lab service with tc in shape v under cacheDir and
// returns the binary's path; a binary already built from the same source
// with the same toolchain and shape is reused.
func Build(ctx context.Context, tc Toolchain, v Variant, cacheDir string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	h := sha256.New()
	fmt.Fprintln(h, tc.Version, tc.Go, tc.Env, v)
	files, err := fs.Glob(serverSource, "server/*.go")
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, _ := serverSource.ReadFile(f)
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	out := filepath.Join(cacheDir, fmt.Sprintf("goapp-%s-%s-%s", tc.Version, v, key))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	src, err := os.MkdirTemp(cacheDir, "goapp-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	for _, f := range files {
		b, _ := serverSource.ReadFile(f)
		if err := os.WriteFile(filepath.Join(src, filepath.Base(f)), b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module goapp\n\ngo 1.19\n"), 0o644); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-o", out + ".tmp"}
	if v.Stripped {
		args = append(args, "-ldflags=-s -w")
	}
	if v.PIE {
		args = append(args, "-buildmode=pie")
	}
	if v.NoProfile {
		args = append(args, "-tags=noprofile")
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, tc.Go, args...)
	cmd.Dir = src
	cgo := "CGO_ENABLED=0"
	if v.Cgo {
		cgo = "CGO_ENABLED=1"
	}
	cmd.Env = append(cleanEnv(), cgo, "GOWORK=off", "GOFLAGS=-mod=mod")
	cmd.Env = append(cmd.Env, tc.Env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the Go lab service with %s (%s): %w\n%s", tc.Version, v, err, b)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", err
	}
	return out, nil
}

// cleanEnv is the environment without the variables that would steer a
// build away from the toolchain and shape asked for.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOROOT", "GOTOOLCHAIN", "GOFLAGS", "CGO_ENABLED", "GOWORK", "GOOS", "GOARCH", "GOEXPERIMENT":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// BuildCurrent builds v with the current toolchain (Current) into the
// cache directory (CacheDir), as the tests and benchmarks that measure the
// lab service run it.
func BuildCurrent(ctx context.Context, v Variant) (string, error) {
	tc, err := Current()
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return Build(ctx, tc, v, dir)
}

// CacheDir is where tests keep built binaries across runs.
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "perfscope-goapp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// ErrNoToolchain: a toolchain a test asked for is not on this machine.
var ErrNoToolchain = errors.New("Go toolchain not available")
