// Package asprof provisions async-profiler and drives it inside a running
// JVM through the attach protocol: find (or fetch) the agent library, make
// it reachable inside the JVM's mount namespace, start and stop profiling,
// and read the collapsed stacks back.
package asprof

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// The pinned artifact. Java shops already mirror Maven Central, so
// perfscope takes async-profiler from there the way their builds take any
// dependency; the SHA-256 pins the exact bytes whatever mirror served them.
const (
	GroupID    = "tools.profiler"
	ArtifactID = "async-profiler"
	Version    = "4.1"
	// ArtifactSHA256 is async-profiler-4.1.jar's digest.
	ArtifactSHA256 = "5535baa56133628cfffe2f05ca9bfef1fae3d5abe49835447262b1c6da4a9582"
	libraryName    = "libasyncProfiler.so"
	// BundleDir is where a packaged perfscope carries the libraries,
	// relative to the directory of its executable: the container image
	// has /usr/local/bin/perfscope and
	// /usr/local/lib/perfscope/async-profiler/4.1/linux-x64/libasyncProfiler.so.
	BundleDir = "../lib/perfscope/async-profiler/" + Version
)

// LibrarySHA256 are the digests of the libraries inside the pinned jar,
// per platform directory: a bundled library is used only when its bytes
// are these (the Dockerfile checks the same digests when it extracts them).
var LibrarySHA256 = map[string]string{
	"linux-x64":   "8d16556469adc3fe6661f0c023bfc2081342c930796b1d68ae1cd8248bef4c28",
	"linux-arm64": "b2f7fa5a7caaf6ebf1f5e4c46af40d6fe7b623ed5421a4f9be7d45a08537a9e7",
}

// ErrUnavailable: no async-profiler library could be found or fetched.
var ErrUnavailable = errors.New("async-profiler is not available")

// ErrChecksum: the artifact's bytes are not the pinned ones.
var ErrChecksum = errors.New("async-profiler artifact does not match the pinned SHA-256")

// Locator finds the agent library on this host.
type Locator struct {
	// Explicit is --async-profiler or $PERFSCOPE_ASYNC_PROFILER: the
	// library, an install directory, or the asprof launcher.
	Explicit string
	// LocalRepo is the Maven local repository; empty means Maven's own
	// default resolution (MAVEN_OPTS, ~/.m2/settings.xml, ~/.m2/repository).
	LocalRepo string
	// CacheDir holds extracted libraries; empty means the user cache dir.
	CacheDir string
	// Mvn is the Maven launcher; empty means "mvn" on PATH.
	Mvn string
	// Arch is a GOARCH; empty means this host's.
	Arch string
	// Executable is perfscope's own path, under which BundleDir is
	// looked up; empty means os.Executable.
	Executable string
}

// Library returns the host path of a libasyncProfiler.so for the host's
// architecture, fetching and extracting the pinned artifact if needed.
func (l Locator) Library(ctx context.Context) (string, error) {
	if l.Explicit != "" {
		return explicitLibrary(l.Explicit)
	}
	platform, err := platformDir(l.arch())
	if err != nil {
		return "", err
	}
	// The library packaged with perfscope (the container image) is the
	// pinned one and needs no network: it comes before anything found
	// on this host.
	if lib, err := l.Bundled(); err == nil {
		return lib, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if p, err := exec.LookPath("asprof"); err == nil {
		if lib, err := explicitLibrary(p); err == nil {
			return lib, nil
		}
	}
	cacheDir, err := l.cacheDir()
	if err != nil {
		return "", err
	}
	cached := filepath.Join(cacheDir, "async-profiler-"+Version, platform, libraryName)
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	jar, err := l.artifact(ctx)
	if err != nil {
		return "", err
	}
	if err := extract(jar, platform+"/"+libraryName, cached); err != nil {
		return "", err
	}
	return cached, nil
}

// Bundled returns the library packaged with perfscope for the host's
// architecture. An error wrapping os.ErrNotExist means none is packaged;
// a packaged library whose digest is not the pinned one is ErrChecksum,
// never used.
func (l Locator) Bundled() (string, error) {
	platform, err := platformDir(l.arch())
	if err != nil {
		return "", err
	}
	exe := l.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find perfscope's own path: %w", errors.Join(err, os.ErrNotExist))
		}
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	lib := filepath.Join(filepath.Dir(exe), BundleDir, platform, libraryName)
	st, err := os.Stat(lib)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrUnavailable, lib)
	}
	if err := verifyDigest(lib, LibrarySHA256[platform]); err != nil {
		return "", err
	}
	return lib, nil
}

func (l Locator) arch() string {
	if l.Arch != "" {
		return l.Arch
	}
	return runtime.GOARCH
}

func platformDir(arch string) (string, error) {
	switch arch {
	case "amd64":
		return "linux-x64", nil
	case "arm64":
		return "linux-arm64", nil
	}
	return "", fmt.Errorf("%w: async-profiler ships no library for linux/%s", ErrUnavailable, arch)
}

func (l Locator) cacheDir() (string, error) {
	if l.CacheDir != "" {
		return l.CacheDir, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory for async-profiler: %w", err)
	}
	return filepath.Join(d, "perfscope"), nil
}

// explicitLibrary accepts what users point at: the .so, the unpacked
// release directory, or its bin/asprof launcher.
func explicitLibrary(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrUnavailable, p, err)
	}
	candidates := []string{p}
	if st.IsDir() {
		candidates = []string{filepath.Join(p, "lib", libraryName), filepath.Join(p, libraryName)}
	} else if !strings.HasSuffix(p, ".so") {
		candidates = []string{filepath.Join(filepath.Dir(p), "..", "lib", libraryName)}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return filepath.Clean(c), nil
		}
	}
	return "", fmt.Errorf("%w: no %s at %s", ErrUnavailable, libraryName, p)
}

// artifact returns the verified jar in the local Maven repository,
// fetching it with Maven when it is not there, so that the user's mirrors,
// proxies and credentials apply and no repository host is named here.
func (l Locator) artifact(ctx context.Context) (string, error) {
	repo := l.localRepo()
	jar := filepath.Join(repo, strings.ReplaceAll(GroupID, ".", "/"), ArtifactID, Version, ArtifactID+"-"+Version+".jar")
	if _, err := os.Stat(jar); err != nil {
		if err := l.fetch(ctx, repo); err != nil {
			return "", err
		}
	}
	if err := verify(jar); err != nil {
		return "", err
	}
	return jar, nil
}

func (l Locator) fetch(ctx context.Context, repo string) error {
	mvn := l.Mvn
	if mvn == "" {
		p, err := exec.LookPath("mvn")
		if err != nil {
			return fmt.Errorf("%w: %s:%s:%s is not in the local Maven repository and mvn is not installed to fetch it", ErrUnavailable, GroupID, ArtifactID, Version)
		}
		mvn = p
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "dependency:get",
		"-Dartifact="+GroupID+":"+ArtifactID+":"+Version, "-Dtransitive=false", "-Dmaven.repo.local="+repo)
	// Maven's output is kept for the error, not streamed: perfscope's
	// own report owns the terminal.
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: `mvn dependency:get -Dartifact=%s:%s:%s` failed (%v): %s", ErrUnavailable, GroupID, ArtifactID, Version, err, lastLine(out.String()))
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "no output"
}

var localRepoSetting = regexp.MustCompile(`<localRepository>\s*([^<\s]+)\s*</localRepository>`)
var localRepoOpt = regexp.MustCompile(`-Dmaven\.repo\.local=(\S+)`)

// localRepo follows Maven's own precedence for where artifacts live.
func (l Locator) localRepo() string {
	if l.LocalRepo != "" {
		return l.LocalRepo
	}
	if m := localRepoOpt.FindStringSubmatch(os.Getenv("MAVEN_OPTS")); m != nil {
		return m[1]
	}
	home, _ := os.UserHomeDir()
	if b, err := os.ReadFile(filepath.Join(home, ".m2", "settings.xml")); err == nil {
		if m := localRepoSetting.FindSubmatch(b); m != nil {
			return strings.ReplaceAll(string(m[1]), "${user.home}", home)
		}
	}
	return filepath.Join(home, ".m2", "repository")
}

func verify(path string) error { return verifyDigest(path, ArtifactSHA256) }

func verifyDigest(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has %s, want %s", ErrChecksum, path, got, want)
	}
	return nil
}

// extract copies one member of the verified jar to dst atomically, so a
// concurrent or interrupted run never sees half a library.
func extract(jar, member, dst string) error {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return fmt.Errorf("open %s: %w", jar, err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != member {
			continue
		}
		src, err := f.Open()
		if err != nil {
			return err
		}
		defer src.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(dst), ".extract-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		if _, err := io.Copy(tmp, io.LimitReader(src, 64<<20)); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Chmod(0o644); err != nil {
			tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		return os.Rename(tmp.Name(), dst)
	}
	return fmt.Errorf("%w: %s has no %s", ErrUnavailable, jar, member)
}
