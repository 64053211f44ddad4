package asprof

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCollapsed(t *testing.T) {
	p, err := ParseCollapsed(strings.NewReader("a;b;byte[]_[i] 300\n\na;c 12\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 312 || len(p.Stacks) != 2 || len(p.Stacks[0].Frames) != 3 {
		t.Fatalf("%+v", p)
	}
	for _, bad := range []string{"nocount\n", "a;b x\n", "a;b -4\n"} {
		if _, err := ParseCollapsed(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStartArgs(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Event: Alloc, AllocInterval: 131072}, "start,event=alloc,alloc=131072,jfr,file=/tmp/x.jfr"},
		{Options{Event: CPU}, "start,event=cpu,total"},
		{Options{Event: Wall, Interval: 5e6}, "start,event=wall,interval=5000000,total"},
		{Options{Event: Alloc, AllocInterval: 524288, Threads: true}, "start,event=alloc,alloc=524288,jfr,file=/tmp/x.jfr"},
		{Options{Event: Lock, Threads: true}, "start,event=lock,threads,total"},
	} {
		if got := tc.o.startArgs("/tmp/x.jfr"); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
	if _, err := ParseEvent("itimer"); err == nil {
		t.Error("unknown event accepted")
	}
}

func TestExplicitLibrary(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib", libraryName)
	os.MkdirAll(filepath.Dir(lib), 0o755)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(lib, []byte("ELF"), 0o644)
	os.WriteFile(filepath.Join(dir, "bin", "asprof"), []byte("#!"), 0o755)
	for _, p := range []string{lib, dir, filepath.Join(dir, "bin", "asprof")} {
		got, err := explicitLibrary(p)
		if err != nil || got != lib {
			t.Errorf("%s: %s %v", p, got, err)
		}
	}
	if _, err := explicitLibrary(filepath.Join(dir, "nope")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("missing: %v", err)
	}
}

// A jar in the local repository whose bytes are not the pinned ones is
// refused, and nothing is extracted from it.
func TestArtifactChecksumIsEnforced(t *testing.T) {
	repo, cache := t.TempDir(), t.TempDir()
	jar := filepath.Join(repo, "tools/profiler/async-profiler", Version, "async-profiler-"+Version+".jar")
	os.MkdirAll(filepath.Dir(jar), 0o755)
	f, _ := os.Create(jar)
	zw := zip.NewWriter(f)
	w, _ := zw.Create("linux-x64/" + libraryName)
	w.Write([]byte("not the real library"))
	zw.Close()
	f.Close()
	l := Locator{LocalRepo: repo, CacheDir: cache, Arch: "amd64", Mvn: "/nonexistent/mvn"}
	if _, err := l.Library(context.Background()); !errors.Is(err, ErrChecksum) {
		t.Fatalf("%v, want ErrChecksum", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("extracted from an unverified jar: %v", entries)
	}
	os.Remove(jar)
	if _, err := l.Library(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no jar, no mvn: %v", err)
	}
	if _, err := (Locator{Arch: "riscv64", CacheDir: cache}).Library(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("riscv64: %v", err)
	}
}

func TestLocalRepoFollowsMaven(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("MAVEN_OPTS", "")
	if got := (Locator{}).localRepo(); got != filepath.Join(home, ".m2", "repository") {
		t.Errorf("default %s", got)
	}
	os.MkdirAll(filepath.Join(home, ".m2"), 0o755)
	os.WriteFile(filepath.Join(home, ".m2", "settings.xml"), []byte("<settings><localRepository>${user.home}/repo</localRepository></settings>"), 0o644)
	if got := (Locator{}).localRepo(); got != filepath.Join(home, "repo") {
		t.Errorf("settings.xml %s", got)
	}
	t.Setenv("MAVEN_OPTS", "-Xmx1g -Dmaven.repo.local=/srv/m2")
	if got := (Locator{}).localRepo(); got != "/srv/m2" {
		t.Errorf("MAVEN_OPTS %s", got)
	}
}

// The library packaged next to perfscope is used when its bytes are the
// pinned ones, without Maven or a network; other bytes are refused.
func TestBundledLibrary(t *testing.T) {
	jar := filepath.Join(os.Getenv("HOME"), ".m2/repository/tools/profiler/async-profiler", Version, "async-profiler-"+Version+".jar")
	if _, err := os.Stat(jar); err != nil {
		if os.Getenv("PERFSCOPE_REQUIRE_ROOT_TESTS") != "" {
			t.Fatalf("%v (scripts/deps.sh test fetches it)", err)
		}
		t.Skip("the pinned jar is not in the local Maven repository")
	}
	for arch, platform := range map[string]string{"amd64": "linux-x64", "arm64": "linux-arm64"} {
		root := t.TempDir()
		exe := filepath.Join(root, "bin", "perfscope")
		os.MkdirAll(filepath.Dir(exe), 0o755)
		os.WriteFile(exe, []byte("#!"), 0o755)
		l := Locator{Executable: exe, Arch: arch, CacheDir: t.TempDir(), LocalRepo: t.TempDir(), Mvn: "/nonexistent/mvn"}
		if _, err := l.Bundled(); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: nothing bundled: %v, want ErrNotExist", arch, err)
		}
		lib := filepath.Join(root, "lib/perfscope/async-profiler", Version, platform, libraryName)
		if err := extract(jar, platform+"/"+libraryName, lib); err != nil {
			t.Fatal(err)
		}
		got, err := l.Library(context.Background())
		if err != nil || got != lib {
			t.Fatalf("%s: %q %v, want %s", arch, got, err, lib)
		}
		os.WriteFile(lib, []byte("tampered"), 0o644)
		if _, err := l.Library(context.Background()); !errors.Is(err, ErrChecksum) {
			t.Fatalf("%s: tampered library: %v, want ErrChecksum", arch, err)
		}
	}
}
