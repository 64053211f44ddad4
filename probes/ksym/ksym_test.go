package ksym

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
)

// kallsymsText lists /proc/kallsyms' text symbols: address, name, module.
func kallsymsText(t *testing.T) (addrs []uint64, names, modules []string) {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || !strings.ContainsAny(fs[1], "tT") {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil || a == 0 {
			continue
		}
		mod := ""
		if len(fs) > 3 {
			mod = strings.Trim(fs[3], "[]")
		}
		addrs, names, modules = append(addrs, a), append(names, fs[2]), append(modules, mod)
	}
	return addrs, names, modules
}

// The kernel's own lookup names what /proc/kallsyms lists, for thousands
// of symbols spread over the whole table (several batches), modules and
// BPF programs included, and leaves nothing loaded once closed.
func TestNamesMatchKallsyms(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	addrs, names, modules := kallsymsText(t)
	if len(addrs) < 1000 {
		t.Fatalf("/proc/kallsyms lists %d text symbols", len(addrs))
	}
	n, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	// Every 37th symbol and every symbol outside the kernel image, each
	// at its start and one byte in (a return address inside it).
	var ask []uint64
	var want []int
	for i := range addrs {
		// ftrace's own trampoline is listed in /proc/kallsyms but not in
		// the tables kallsyms_lookup searches: "%ps" prints its address,
		// so its frames read [unknown] (only kprobes and fentry, which
		// perfscope does not use, run code there).
		if modules[i] == "__builtin__ftrace" {
			continue
		}
		if i%37 == 0 || modules[i] != "" {
			ask = append(ask, addrs[i], addrs[i]+1)
			want = append(want, i, i)
		}
	}
	got, err := n.NameKernel(ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ask) {
		t.Fatalf("named %d of %d addresses", len(got), len(ask))
	}
	// Other processes load and unload BPF programs meanwhile: compare
	// only the symbols that kallsyms still lists.
	still := map[string]bool{}
	a2, n2, m2 := kallsymsText(t)
	for i := range a2 {
		still[fmt.Sprint(a2[i], n2[i], m2[i])] = true
	}
	bad, compared := 0, 0
	for j, g := range got {
		i := want[j]
		if !still[fmt.Sprint(addrs[i], names[i], modules[i])] {
			continue
		}
		compared++
		// Several symbols may share an address (aliases): any of them is
		// the same function.
		ok := false
		for k := i; k >= 0 && addrs[k] == addrs[i]; k-- {
			ok = ok || (g.Name == names[k] && g.Module == modules[k])
		}
		for k := i; k < len(addrs) && addrs[k] == addrs[i]; k++ {
			ok = ok || (g.Name == names[k] && g.Module == modules[k])
		}
		if !g.OK || !ok {
			if bad++; bad <= 10 {
				t.Errorf("%#x: named %q [%s] ok=%v; kallsyms lists %q [%s]", ask[j], g.Name, g.Module, g.OK, names[i], modules[i])
			}
		}
	}
	if bad > 0 || compared < len(ask)*9/10 {
		t.Errorf("%d of %d addresses named unlike /proc/kallsyms (%d compared)", bad, len(ask), compared)
	}
	// An address below the kernel's text is no symbol.
	if got, err := n.NameKernel([]uint64{0x1000}); err != nil || got[0].OK {
		t.Errorf("0x1000 named %+v (err %v), want no symbol", got, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NameKernel(ask[:1]); err == nil {
		t.Error("a closed namer still named")
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}

// The kernel's lookup prints a BPF program or trampoline without the
// [bpf] that /proc/kallsyms gives it; the namer adds it, and leaves the
// kernel's own bpf_* functions and module symbols as printed.
func TestParseNameMarksJITtedBPF(t *testing.T) {
	slot := func(text string) *ksymKsymName {
		var s ksymKsymName
		for i := 0; i < len(text); i++ {
			s.Name[i] = int8(text[i])
		}
		s.Len = int32(len(text) + 1)
		return &s
	}
	for _, c := range []struct{ text, name, module string }{
		{"bpf_prog_9b21cb24a81bb43e_btf_softirq_raise", "bpf_prog_9b21cb24a81bb43e_btf_softirq_raise", "bpf"},
		{"bpf_prog_6deef7357e7b4530", "bpf_prog_6deef7357e7b4530", "bpf"},
		{"bpf_trampoline_6442493856", "bpf_trampoline_6442493856", "bpf"},
		{"bpf_prog_alloc", "bpf_prog_alloc", ""},
		{"bpf_trampoline_link_prog", "bpf_trampoline_link_prog", ""},
		{"e1000_clean [e1000]", "e1000_clean", "e1000"},
		{"tcp_v4_rcv", "tcp_v4_rcv", ""},
	} {
		got := parseName(slot(c.text))
		if !got.OK || got.Name != c.name || got.Module != c.module {
			t.Errorf("%q: named %+v, want %s [%s]", c.text, got, c.name, c.module)
		}
	}
	if got := parseName(slot("0xffffffffc0026820")); got.OK {
		t.Errorf("an address is no symbol: %+v", got)
	}
}
