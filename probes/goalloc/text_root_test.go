package goalloc_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/goapp"
	"github.com/perfscope/perfscope/probes/goalloc"
)

// int3 is the breakpoint a uprobe writes over the first byte of the
// instruction it probes (x86).
const int3 = 0xcc

// The hooks' breakpoints are in the target's text exactly while the
// hooks are attached: each hook's first byte reads int3 through
// /proc/PID/mem after Open, the pool hooks' read their own bytes again
// once DetachPools returns and int3 again after AttachPools, and after
// Close every hook's bytes are the program's own. So a detached pool
// hook costs the program no trap, and the probe leaves nothing in the
// program's text. Both ways of attaching the pool hooks: one
// uprobe_multi link (where the kernel has them) and one by one. When the
// pool hooks' bytes came back, against DetachPools' start and return, is
// logged: the guard charges what the hooks' programs count, and a
// breakpoint left in the text after its program stopped costs a trap
// that no counter sees.
func TestHooksLeaveTheTextAsTheyFoundIt(t *testing.T) {
	for _, oneByOne := range []bool{false, true} {
		name := "one-link"
		if oneByOne {
			name = "one-by-one"
		}
		t.Run(name, func(t *testing.T) { testHooksLeaveTheText(t, oneByOne) })
	}
}

func testHooksLeaveTheText(t *testing.T, oneByOne bool) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	ctx := context.Background()
	srv, proc, o := startLabService(t, goapp.Config{Mode: "pooled", Count: 2, Size: 1024})
	o.PID, o.Executable, o.PoolsOneByOne = srv.PID, proc.Exe, oneByOne
	hooks := map[string]uint64{goalloc.HookMalloc: o.Malloc, goalloc.HookGC: o.GC,
		goalloc.HookPoolGet: o.PoolGet, goalloc.HookPoolPut: o.PoolPut, goalloc.HookPoolNew: o.PoolNew}
	pools := []string{goalloc.HookPoolGet, goalloc.HookPoolPut, goalloc.HookPoolNew}
	text := newTextReader(t, srv.PID, proc.Exe)
	own := map[string]byte{}
	for hook, off := range hooks {
		if off == 0 {
			t.Fatalf("%s not found in the lab service", hook)
		}
		own[hook] = text.byteAt(off)
		if own[hook] == int3 {
			t.Fatalf("%s's first byte is already int3 before any probe", hook)
		}
	}
	expect := func(when string, names []string, attached bool) {
		t.Helper()
		for _, hook := range names {
			got, want := text.byteAt(hooks[hook]), own[hook]
			if attached {
				want = int3
			}
			if got != want {
				t.Errorf("%s: %s's first byte is %#x, want %#x", when, hook, got, want)
			}
		}
	}
	all := append([]string{goalloc.HookMalloc, goalloc.HookGC}, pools...)

	p, err := goalloc.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Missing()) != 0 {
		t.Fatalf("hooks missing: %v", p.Missing())
	}
	expect("after Open", all, true)
	// Linux 6.10 and later: uprobe_multi links that filter by process.
	if !oneByOne && kernelAtLeast(t, 6, 10) && !p.PoolsOneLink() {
		t.Errorf("the pool hooks are not one link on Linux %s (uprobe_multi links: %v)", kernelRelease(t), features.HaveBPFLinkUprobeMulti())
	}
	if oneByOne && p.PoolsOneLink() {
		t.Error("PoolsOneByOne set, but the pool hooks are one link")
	}

	// Poll the pool hooks' bytes while DetachPools runs.
	var back [3]atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			done := true
			for i, hook := range pools {
				if back[i].Load() == 0 {
					if text.byteAt(hooks[hook]) == int3 {
						done = false
					} else {
						back[i].Store(int64(time.Since(start)))
					}
				}
			}
			if done {
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	if err := p.DetachPools(); err != nil {
		t.Fatal(err)
	}
	returned := time.Since(start)
	close(stop)
	<-polled
	msg := fmt.Sprintf("DetachPools returned after %.1f ms; the hooks' bytes were back after", float64(returned)/1e6)
	for i, hook := range pools {
		if b := back[i].Load(); b > 0 {
			msg += fmt.Sprintf(" %s %.1f ms", hook, float64(b)/1e6)
		} else {
			msg += fmt.Sprintf(" %s (not seen before the return)", hook)
		}
	}
	t.Log(msg)
	expect("after DetachPools", pools, false)
	expect("after DetachPools", []string{goalloc.HookMalloc, goalloc.HookGC}, true)
	if err := srv.Work(ctx, 200, 2); err != nil {
		t.Fatal(err)
	}

	if err := p.AttachPools(); err != nil {
		t.Fatal(err)
	}
	expect("after AttachPools", all, true)
	// Re-attached, the hooks count again: the service's 200 requests
	// call its pool twice each.
	before, err := p.PoolCounts()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Work(ctx, 200, 2); err != nil {
		t.Fatal(err)
	}
	after, err := p.PoolCounts()
	if err != nil {
		t.Fatal(err)
	}
	var gets uint64
	for pool, c := range after {
		gets += c.Gets - before[pool].Gets
	}
	if gets < 400 {
		t.Errorf("%d Gets counted after AttachPools for 200 requests of 2 pooled buffers each", gets)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	expect("after Close", all, false)
	if err := srv.Work(ctx, 200, 2); err != nil {
		t.Fatal(err)
	}
	if !srv.Alive() {
		t.Error("the service died under the probe")
	}
}

// textReader reads the target's text at a file offset of its executable,
// through its mappings (/proc/PID/maps) and its memory (/proc/PID/mem),
// where a uprobe's breakpoint shows.
type textReader struct {
	t   *testing.T
	mem *os.File
	// maps of the executable: runtime start, end and file offset.
	maps [][3]uint64
}

func newTextReader(t *testing.T, pid int, exe string) *textReader {
	t.Helper()
	fi, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	ino := fmt.Sprint(inode(t, fi))
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &textReader{t: t}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[4] != ino {
			continue
		}
		se := strings.SplitN(fs[0], "-", 2)
		start, err1 := strconv.ParseUint(se[0], 16, 64)
		end, err2 := strconv.ParseUint(se[1], 16, 64)
		off, err3 := strconv.ParseUint(fs[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad maps line %q", sc.Text())
		}
		r.maps = append(r.maps, [3]uint64{start, end, off})
	}
	if len(r.maps) == 0 {
		t.Fatalf("no mapping of %s (inode %s) in pid %d", exe, ino, pid)
	}
	if r.mem, err = os.Open(fmt.Sprintf("/proc/%d/mem", pid)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mem.Close() })
	return r
}

func (r *textReader) byteAt(off uint64) byte {
	for _, m := range r.maps {
		if off >= m[2] && off < m[2]+(m[1]-m[0]) {
			var b [1]byte
			if _, err := r.mem.ReadAt(b[:], int64(m[0]+off-m[2])); err != nil {
				r.t.Errorf("read text at file offset %#x: %v", off, err)
			}
			return b[0]
		}
	}
	r.t.Fatalf("file offset %#x is in no mapping of the executable", off)
	return 0
}

func inode(t *testing.T, fi os.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no inode for %s", fi.Name())
	}
	return st.Ino
}

// startLabService builds the lab service (stripped, PIE), starts it with
// c, warms it up and finds the probe's offsets in it; the service stops
// and the process closes at the test's end.
func startLabService(t *testing.T, c goapp.Config) (*goapp.Server, *golang.Process, goalloc.Options) {
	t.Helper()
	ctx := context.Background()
	path, err := goapp.BuildCurrent(ctx, goapp.Variant{Stripped: true, PIE: true})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := goapp.Start(ctx, path, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.WarmUp(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	proc, err := golang.OpenProcess(golang.FS{}, srv.PID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	targets, err := golang.FindTargets(proc.Binary)
	if err != nil {
		t.Fatal(err)
	}
	return srv, proc, targets.Options
}

func kernelRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(kernelRelease(t), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", kernelRelease(t), err)
	}
	return ma > major || (ma == major && mi >= minor)
}
