package symbols

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// fakeNamer names addresses as "fn_<hex>" in module "mod", or fails.
type fakeNamer struct {
	asked  *[][]uint64
	closed *int
	err    error
}

func (n fakeNamer) NameKernel(addrs []uint64) ([]KernelName, error) {
	if n.err != nil {
		return nil, n.err
	}
	*n.asked = append(*n.asked, slices.Clone(addrs))
	out := make([]KernelName, len(addrs))
	for i, a := range addrs {
		out[i] = KernelName{Name: fmt.Sprintf("fn_%x", a), Module: "mod", OK: a != 0}
	}
	return out, nil
}

func (n fakeNamer) Close() error { *n.closed++; return nil }

// With a kernel namer, kernel frames are named by it — each address asked
// once, the namer closed after each batch — and /proc/kallsyms is never
// read; a namer that fails hands over to kallsyms for good.
func TestKernelNamerFirstThenKallsyms(t *testing.T) {
	dir := t.TempDir() // no proc/kallsyms: reading it would fail
	var asked [][]uint64
	closed, opened := 0, 0
	s := New(FS{Root: dir})
	s.UseKernelNamer(func() (KernelNamer, error) {
		opened++
		return fakeNamer{asked: &asked, closed: &closed}, nil
	})
	got := s.Kernel([]uint64{0x10, 0x20, 0x10})
	if want := []string{"fn_10_[k]", "fn_20_[k]", "fn_10_[k]"}; !slices.Equal(got, want) {
		t.Fatalf("Kernel = %q, want %q", got, want)
	}
	if names := s.KernelNames([]uint64{0x20, 0x30, 0}); names[1] != (KernelName{"fn_30", "mod", true}) || names[2].OK {
		t.Errorf("KernelNames = %+v", names)
	}
	if r := s.KernelTable([]uint64{0x20}); r[0x20].Name != "fn_20" {
		t.Errorf("KernelTable = %+v", r)
	}
	if want := [][]uint64{{0x10, 0x20}, {0x30, 0}}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("namer asked %v, want each address once: %v", asked, want)
	}
	if opened != 2 || closed != 2 {
		t.Errorf("namer opened %d times, closed %d: want one each per batch with new addresses", opened, closed)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q: kallsyms was read", w)
	}

	// A namer that cannot open, or fails: kallsyms names, and the namer
	// is not asked again.
	mustCopy(t, filepath.Join("testdata", "kallsyms"), filepath.Join(dir, "proc", "kallsyms"))
	for _, failing := range []func() (KernelNamer, error){
		func() (KernelNamer, error) { opened++; return nil, errors.New("no bpf_snprintf") },
		func() (KernelNamer, error) {
			opened++
			return fakeNamer{asked: &asked, closed: &closed, err: errors.New("test run refused")}, nil
		},
	} {
		opened = 0
		s := New(FS{Root: dir})
		s.UseKernelNamer(failing)
		if got := s.Kernel([]uint64{0xffffffff81001010}); got[0] != "do_syscall_64_[k]" {
			t.Errorf("after the namer failed: %q, want kallsyms' do_syscall_64_[k]", got)
		}
		s.Kernel([]uint64{0xffffffff81001250})
		if opened != 1 {
			t.Errorf("failed namer opened %d times, want once", opened)
		}
	}
}
