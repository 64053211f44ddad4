package symbols

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

func openFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestKallsymsResolvesTextSymbols(t *testing.T) {
	k, err := parseKallsyms(openFixture(t, "kallsyms"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Restricted {
		t.Fatal("fixture with real addresses parsed as restricted")
	}
	for _, c := range []struct {
		addr   uint64
		name   string
		module string
		ok     bool
	}{
		{0xffffffff81001000, "do_syscall_64", "", true},
		{0xffffffff810011ff, "do_syscall_64", "", true},
		{0xffffffff81001250, "__do_sys_getpid", "", true},
		// The data symbol at ...1300 must not shadow the function.
		{0xffffffff81001400, "__do_sys_getpid", "", true},
		{0xffffffff81002010, "weak_text_function", "", true},
		{0xffffffffc0300010, "veth_poll", "veth", true},
		{0xffffffffc0300500, "veth_xmit", "veth", true},
		{0xffffffff80000000, "", "", false},
	} {
		name, module, ok := k.Resolve(c.addr)
		if name != c.name || module != c.module || ok != c.ok {
			t.Errorf("Resolve(%#x) = %q, %q, %v; want %q, %q, %v", c.addr, name, module, ok, c.name, c.module, c.ok)
		}
	}
}

func TestKallsymsDetectsHiddenAddresses(t *testing.T) {
	k, err := parseKallsyms(openFixture(t, "kallsyms-restricted"))
	if err != nil {
		t.Fatal(err)
	}
	if !k.Restricted {
		t.Fatal("all-zero kallsyms not detected as restricted")
	}
	if name, _, ok := k.Resolve(0xffffffff81001000); ok {
		t.Errorf("restricted kallsyms resolved an address to %q", name)
	}
	dir := t.TempDir()
	mustCopy(t, filepath.Join("testdata", "kallsyms-restricted"), filepath.Join(dir, "proc", "kallsyms"))
	s := New(FS{Root: dir})
	if got := s.Kernel([]uint64{0xffffffff81001000}); got[0] != "[unknown]_[k]" {
		t.Errorf("frame = %q, want [unknown]_[k]", got[0])
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "kptr_restrict") {
		t.Errorf("warnings = %q, want one naming kptr_restrict", w)
	}
}

func TestKallsymsRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "zzzz T foo\n", "not kallsyms at all\n"} {
		if _, err := parseKallsyms(strings.NewReader(in)); err == nil {
			t.Errorf("parseKallsyms(%q) succeeded", in)
		}
	}
}

func TestPerfMapParsesAndLatestWins(t *testing.T) {
	m, err := parsePerfMap(openFixture(t, "perf-4242.map"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 4 {
		t.Errorf("entries = %d, want 4 (one start listed twice)", m.Len())
	}
	for _, c := range []struct {
		addr uint64
		name string
		ok   bool
	}{
		{0x7f3a10001000, "Interpreter", true},
		{0x7f3a1000107f, "Interpreter", true},
		{0x7f3a10001080, "", false}, // past the 0x80 bytes
		{0x7f3a10002100, "Lcom/example/Server;::handleRecompiled", true},
		{0x7f3a10003010, "LambdaForm$MH/0x0000000800c01000::invoke", true},
		{0x7f3a100040ff, "Ljava/util/HashMap;::getNode", true},
		{0x1000, "", false},
	} {
		name, ok := m.Resolve(c.addr)
		if name != c.name || ok != c.ok {
			t.Errorf("Resolve(%#x) = %q, %v; want %q, %v", c.addr, name, ok, c.name, c.ok)
		}
	}
	if _, err := parsePerfMap(strings.NewReader("7f00 zz name\n")); err == nil {
		t.Error("bad size accepted")
	}
	if _, err := parsePerfMap(strings.NewReader("justonefield\n")); err == nil {
		t.Error("line without size accepted")
	}
}

func TestParseMapsKeepsExecutableMappings(t *testing.T) {
	maps, err := parseMaps(openFixture(t, "maps"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range maps {
		got = append(got, fmt.Sprintf("%x+%x %s %v", m.Start, m.Offset, m.Module(), m.Deleted))
	}
	want := []string{
		"55ed4132c000+2000 server false",
		"7f3a10000000+0 [anon] false",
		"7fda3cd04000+26000 libc.so.6 false",
		"7fda3d000000+1000 lib with space.so true",
		"7ffc1e9f1000+0 [vdso] false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mappings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := parseMaps(strings.NewReader("55ed-zz r-xp 0 fe:00 1 /x\n")); err == nil {
		t.Error("bad address accepted")
	}
}

// A process in a container: its perf map is named after its namespace pid
// and lives in its own /tmp, reached through /proc/PID/root.
func TestUserFramesOfContainerisedJIT(t *testing.T) {
	root := t.TempDir()
	proc := filepath.Join(root, "proc", "4242")
	mustCopy(t, "testdata/maps", filepath.Join(proc, "maps"))
	mustCopy(t, "testdata/status", filepath.Join(proc, "status"))
	mustCopy(t, "testdata/perf-4242.map", filepath.Join(proc, "root", "tmp", "perf-7.map"))

	s := New(FS{Root: root})
	got := s.User(4242, []uint64{
		0x7f3a10002010, // JIT code in the anonymous rwx mapping
		0x7f3a100f0000, // same mapping, not in the perf map
		0x55ed4132d000, // a binary the fixture does not provide
		0x7fda3d000100, // a deleted library
		0x7ffc1e9f1100, // vdso
		0x10,           // no mapping at all
	})
	want := []string{
		"Lcom/example/Server;::handleRecompiled_[j]",
		"[unknown] ([anon])",
		"[unknown] (server)",
		"[unknown] (lib with space.so)",
		"[unknown] ([vdso])",
		"[unknown]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const knownFunctionsC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) int known_alpha(int x) { return x * 3 + 1; }
__attribute__((noinline)) int known_beta(int x) { return known_alpha(x) ^ 0x55; }

int main(void) {
	alarm(30); /* never outlive a test that forgot us */
	/* getppid through dlsym: the program references it nowhere else, so
	 * even a non-PIE build has no PLT stub standing in for it. */
	printf("%p %p %p %p\n", (void *)known_alpha, (void *)known_beta,
	       dlsym(RTLD_DEFAULT, "getppid"), (void *)getpid);
	fflush(stdout);
	char c = 0;
	if (read(0, &c, 1) < 0)
		return 1;
	return known_beta(c) & 1;
}
`

const knownFunctionsGo = `package main

import (
	"fmt"
	"os"
	"reflect"
)

//go:noinline
func spinHere(n int) int {
	for i := 0; i < n; i++ {
		n ^= i
	}
	return n
}

func main() {
	fmt.Printf("%#x\n", reflect.ValueOf(spinHere).Pointer())
	os.Stdin.Read(make([]byte, 1))
	os.Exit(spinHere(3) & 0)
}
`

// startPrinting runs bin, which prints function addresses on its first line
// and then waits for its standard input to close.
func startPrinting(t *testing.T, bin string) (pid int, addrs []uint64) {
	t.Helper()
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(line) {
		a, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("test program printed %q: %v", line, err)
		}
		addrs = append(addrs, a)
	}
	return cmd.Process.Pid, addrs
}

// A PIE C program loaded at a random address: its functions resolve through
// /proc/PID/maps, the load bias and its .symtab; libc's through .dynsym.
// The same whether the binaries are read whole or, prepared, for the
// sampled addresses only.
func TestUserFramesOfRunningCProgram(t *testing.T) {
	for _, variant := range []struct {
		name     string
		flags    []string
		prepared bool
	}{{"pie", []string{"-fPIE", "-pie"}, false}, {"no-pie", []string{"-fno-PIE", "-no-pie"}, false},
		{"pie prepared", []string{"-fPIE", "-pie"}, true}, {"no-pie prepared", []string{"-fno-PIE", "-no-pie"}, true}} {
		t.Run(variant.name, func(t *testing.T) {
			bin := testutil.BuildC(t, knownFunctionsC, variant.flags...)
			pid, addrs := startPrinting(t, bin)
			if len(addrs) != 4 {
				t.Fatalf("program printed %d addresses, want 4", len(addrs))
			}
			// +1: a return address points inside the function, not at it.
			sampled := []uint64{addrs[0] + 1, addrs[1] + 1, addrs[2] + 1, addrs[3] + 1}
			s := New(Default)
			if variant.prepared {
				s.PrepareUser(map[int][]uint64{pid: sampled})
				for key, b := range s.binaries {
					if b != nil && b.some == nil {
						t.Errorf("binary %v read whole, want only the sampled addresses", key)
					}
				}
			}
			got := s.User(pid, sampled)
			if got[0] != "known_alpha" || got[1] != "known_beta" {
				t.Errorf("frames = %q, want known_alpha, known_beta", got[:2])
			}
			if !strings.Contains(got[2], "getppid") {
				t.Errorf("libc frame = %q, want getppid", got[2])
			}
			// &getpid is libc's getpid (PIE, through the GOT) or the
			// program's PLT stub (non-PIE), which has no symbol of its own
			// and must not borrow a neighbour's.
			if !strings.Contains(got[3], "getpid") && got[3] != "[unknown] (prog)" {
				t.Errorf("&getpid frame = %q, want getpid or [unknown] (prog)", got[3])
			}
			if variant.prepared {
				// An address the binary was not read for: read whole now.
				if got := s.User(pid, []uint64{addrs[1] + 2}); got[0] != "known_beta" {
					t.Errorf("an address not prepared: %q, want known_beta", got[0])
				}
			}
		})
	}
}

func TestUserFramesOfRunningGoProgram(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool needed to build the test program: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(knownFunctionsGo), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module spin\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "spin")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pid, addrs := startPrinting(t, bin)
	if len(addrs) != 1 {
		t.Fatalf("program printed %d addresses, want 1", len(addrs))
	}
	if got := New(Default).User(pid, []uint64{addrs[0] + 4}); got[0] != "main.spinHere" {
		t.Errorf("frame = %q, want main.spinHere", got[0])
	}
}

func TestReadBinaryAppliesSegmentBias(t *testing.T) {
	bin := testutil.BuildC(t, knownFunctionsC, "-fPIE", "-pie")
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := ReadBinary(f)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() == 0 {
		t.Fatal("no function symbols read")
	}
	if _, err := ReadBinary(strings.NewReader("not an ELF file")); err == nil {
		t.Error("non-ELF input accepted")
	}
}

func mustCopy(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
