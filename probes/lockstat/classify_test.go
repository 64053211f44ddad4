package lockstat

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestClassifyRecordedStacks runs the classifier over stacks recorded on a
// real kernel (testdata/stacks.txt: class, tab, frames innermost first).
func TestClassifyRecordedStacks(t *testing.T) {
	f, err := os.Open("testdata/stacks.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	seen := map[Class]bool{}
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		want, stack, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("bad fixture line %q", line)
		}
		n++
		seen[Class(want)] = true
		if got := Classify(strings.Split(stack, ";")); got != Class(want) {
			t.Errorf("Classify(%.120s…) = %s, want %s", stack, got, want)
		}
	}
	for _, c := range []Class{SocketReceiveQueue, SocketWakeup, SocketLock, QdiscRootLock, TXQueueLock, Other} {
		if !seen[c] {
			t.Errorf("fixture has no stack of class %s", c)
		}
	}
	if n < 10 {
		t.Errorf("only %d fixture stacks", n)
	}
}

func TestClassifyEmptyAndUnknown(t *testing.T) {
	if got := Classify(nil); got != Other {
		t.Errorf("empty stack: %s", got)
	}
	if got := Classify([]string{"0xffffffffc0001234", "_raw_spin_lock"}); got != Other {
		t.Errorf("unknown frames: %s", got)
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{
		"do_epoll_pwait.part.0":      "do_epoll_pwait",
		"udp_rmem_release+0x1a/0x80": "udp_rmem_release",
		"fn [veth]":                  "fn",
		"sock_def_readable":          "sock_def_readable",
	} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

type fakeResolver map[uint64]string

func (f fakeResolver) Resolve(addr uint64) (string, string, bool) {
	n, ok := f[addr]
	if !ok {
		return "", "", false
	}
	if mod, fn, ok := strings.Cut(n, ":"); ok {
		return fn, mod, true
	}
	return n, "", true
}

func TestSymbolizeDropsTracingFrames(t *testing.T) {
	r := fakeResolver{1: "_einittext", 2: "bpf_trace_run2", 3: "_raw_spin_lock", 4: "veth:veth_xmit"}
	got := strings.Join(Symbolize([]uint64{1, 2, 3, 4, 5}, r), ";")
	if want := "_raw_spin_lock;veth_xmit [veth];0x5"; got != want {
		t.Errorf("Symbolize = %q, want %q", got, want)
	}
}

func TestLockKind(t *testing.T) {
	for flags, want := range map[uint32]string{FlagSpin: "spinlock", FlagMutex: "mutex", FlagMutex | FlagSpin: "mutex",
		FlagRead | FlagRT: "rwsem:R", FlagWrite: "rwlock:W", 0x400: "flags(0x400)"} {
		if got := LockKind(flags); got != want {
			t.Errorf("LockKind(%#x) = %s, want %s", flags, got, want)
		}
	}
}
