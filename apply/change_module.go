package apply

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/diagnose"
)

// Kernel modules (and the legacy iptables tables they provide): unloaded
// with delete_module(2) and loaded back with finit_module(2) from the file
// modules.dep names, with the parameters they had. Modules are host-wide,
// so an unload is refused while any other network namespace exists — its
// tables would vanish with the module, unseen by this run.

type moduleHandler struct{}

func (moduleHandler) read(s *System, c diagnose.Change) (state, error) {
	m, err := need(s.Modules, "kernel modules")
	if err != nil {
		return state{}, err
	}
	loaded, err := m.Loaded(c.Module)
	if err != nil {
		return state{}, err
	}
	if !loaded {
		return state{value: diagnose.ValueUnloaded}, nil
	}
	f, err := m.File(c.Module)
	if err != nil {
		// Known only when needed: an apply cannot be undone without it.
		return state{value: diagnose.ValueLoaded}, nil
	}
	return state{value: diagnose.ValueLoaded, saved: &Saved{Module: &f}}, nil
}

func (moduleHandler) guard(s *System, c diagnose.Change, st state) error {
	if st.saved == nil || st.saved.Module == nil {
		_, err := s.Modules.File(c.Module)
		return fmt.Errorf("module %s could not be loaded back, so it is not unloaded: %w", c.Module, err)
	}
	ns, err := need(s.Namespaces, "network namespaces")
	if err != nil {
		return err
	}
	others, err := ns.Others()
	if err != nil {
		return fmt.Errorf("list network namespaces: %w", err)
	}
	if len(others) > 0 {
		return fmt.Errorf("module %s is host-wide and %d other network namespaces exist (%s): unloading it would change them too, unseen by this run", c.Module, len(others), strings.Join(first(others, 3), ", "))
	}
	if c.Kind != diagnose.ChangeIptablesTable {
		return nil
	}
	ipt, err := need(s.Iptables, "iptables")
	if err != nil {
		return err
	}
	t, err := ipt.Table(c.Family, c.Table)
	if err != nil {
		return fmt.Errorf("read iptables table %s/%s: %w", c.Family, c.Table, err)
	}
	if t.Rules > 0 {
		return fmt.Errorf("iptables table %s/%s now holds %d rules: it is in use", c.Family, c.Table, t.Rules)
	}
	if len(t.UserChains) > 0 {
		// Reloaded, the table has only its built-in chains.
		return fmt.Errorf("iptables table %s/%s is not unused: it has user chains (%s)", c.Family, c.Table, strings.Join(first(t.UserChains, 3), ", "))
	}
	for chain, policy := range t.Policies {
		if policy != "ACCEPT" {
			// Reloaded, the table accepts: the policy would be lost.
			return fmt.Errorf("iptables table %s/%s is not unused: chain %s has policy %s", c.Family, c.Table, chain, policy)
		}
	}
	return nil
}

func first(s []string, n int) []string { return s[:min(len(s), n)] }

func (moduleHandler) write(s *System, c diagnose.Change, value string, saved *Saved) error {
	if value == diagnose.ValueUnloaded {
		return s.Modules.Unload(c.Module)
	}
	if saved == nil || saved.Module == nil {
		return fmt.Errorf("no saved file to load module %s from", c.Module)
	}
	return s.Modules.Load(*saved.Module)
}

func (moduleHandler) same(_ diagnose.Change, value string, _ *Saved, st state) bool {
	return value == st.value
}

// --- the kernel -------------------------------------------------------------------

type kernelModules struct{ root string }

func (k kernelModules) Loaded(name string) (bool, error) {
	loaded, err := procfs.FS{Root: k.root}.Modules()
	if err != nil {
		return false, err
	}
	_, ok := loaded[name]
	return ok, nil
}

// ModuleExtensions are the file names modules.dep may list.
var moduleExtensions = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

var moduleParam = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}=[A-Za-z0-9_.,:+-]{0,256}$`)

func moduleNameOf(file string) string {
	base := filepath.Base(file)
	for _, ext := range moduleExtensions {
		if n, ok := strings.CutSuffix(base, ext); ok {
			return strings.ReplaceAll(n, "-", "_")
		}
	}
	return ""
}

func (k kernelModules) release() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// File finds the module in /lib/modules/RELEASE/modules.dep and reads its
// parameters from /sys/module/NAME/parameters.
func (k kernelModules) File(name string) (ModuleFile, error) {
	rel, err := k.release()
	if err != nil {
		return ModuleFile{}, err
	}
	dir := filepath.Join("/lib/modules", rel)
	f, err := os.Open(filepath.Join(k.root, dir, "modules.dep"))
	if err != nil {
		return ModuleFile{}, fmt.Errorf("find module %s: %w", name, err)
	}
	defer f.Close()
	var mf ModuleFile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		file, _, ok := strings.Cut(sc.Text(), ":")
		if ok && moduleNameOf(file) == strings.ReplaceAll(name, "-", "_") {
			mf.Path = filepath.Join(dir, file)
			break
		}
	}
	if err := sc.Err(); err != nil {
		return ModuleFile{}, err
	}
	if mf.Path == "" {
		return ModuleFile{}, fmt.Errorf("module %s is not in %s/modules.dep", name, dir)
	}
	if err := ValidModulePath(mf.Path, rel); err != nil {
		return ModuleFile{}, err
	}
	params, err := os.ReadDir(filepath.Join(k.root, "/sys/module", name, "parameters"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ModuleFile{}, err
	}
	var words []string
	for _, p := range params {
		b, err := os.ReadFile(filepath.Join(k.root, "/sys/module", name, "parameters", p.Name()))
		if err != nil {
			continue // write-only or unreadable: it keeps its default
		}
		w := p.Name() + "=" + strings.TrimSpace(string(b))
		if !moduleParam.MatchString(w) {
			return ModuleFile{}, fmt.Errorf("module %s: parameter %q could not be restored", name, w)
		}
		words = append(words, w)
	}
	mf.Params = strings.Join(words, " ")
	return mf, nil
}

// ValidModulePath accepts only a module file under /lib/modules/RELEASE.
func ValidModulePath(path, release string) error {
	dir := filepath.Join("/lib/modules", release) + "/"
	if path != filepath.Clean(path) || !strings.HasPrefix(path, dir) || moduleNameOf(path) == "" {
		return fmt.Errorf("module file %q is not a module under %s", path, dir)
	}
	return nil
}

func (kernelModules) Unload(name string) error {
	if err := unix.DeleteModule(name, unix.O_NONBLOCK); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("unload module %s: it is in use", name)
		}
		return fmt.Errorf("unload module %s: %w", name, err)
	}
	return nil
}

// Load loads the file with finit_module(2), decompressed by the kernel
// (MODULE_INIT_COMPRESSED_FILE) when it is compressed; its dependencies
// must be loaded already, as they were when it was unloaded.
func (k kernelModules) Load(mf ModuleFile) error {
	rel, err := k.release()
	if err != nil {
		return err
	}
	if err := ValidModulePath(mf.Path, rel); err != nil {
		return err
	}
	for _, w := range strings.Fields(mf.Params) {
		if !moduleParam.MatchString(w) {
			return fmt.Errorf("module parameter %q", w)
		}
	}
	f, err := os.OpenFile(filepath.Join(k.root, mf.Path), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	flags := 0
	if !strings.HasSuffix(mf.Path, ".ko") {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	if err := unix.FinitModule(int(f.Fd()), mf.Params, flags); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", mf.Path, err)
	}
	return nil
}

// --- legacy iptables tables through getsockopt ------------------------------------

// sockoptIptables reads a table with collectors/netconfig's x_tables
// reader (IPT_SO_GET_INFO and IPT_SO_GET_ENTRIES), the one the run
// counted the rules with.
type sockoptIptables struct{}

func (sockoptIptables) Table(family, name string) (IptablesTable, error) {
	t, err := netconfig.ReadLegacyTable(family, name)
	if err != nil {
		return IptablesTable{}, err
	}
	return IptablesTable{Rules: t.Rules, UserChains: t.Chains, Policies: t.Policies}, nil
}

// --- other network namespaces -------------------------------------------------------

type procNamespaces struct{ root string }

// Others lists network namespaces other than the caller's: those of
// processes (bounded scan) and those `ip netns` keeps without one.
func (p procNamespaces) Others() ([]string, error) {
	self, err := os.Readlink(filepath.Join(p.root, "/proc/thread-self/ns/net"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{self: true}
	var others []string
	entries, err := os.ReadDir(filepath.Join(p.root, "/proc"))
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if i > 1<<16 {
			break
		}
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		ns, err := os.Readlink(filepath.Join(p.root, "/proc", e.Name(), "ns/net"))
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		others = append(others, ns+" (pid "+e.Name()+")")
	}
	var selfSt unix.Stat_t
	if unix.Stat(filepath.Join(p.root, "/proc/thread-self/ns/net"), &selfSt) == nil {
		bound, _ := os.ReadDir(filepath.Join(p.root, "/run/netns"))
		for _, b := range bound {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(p.root, "/run/netns", b.Name()), &st) == nil && st.Ino != selfSt.Ino {
				name := fmt.Sprintf("net:[%d]", st.Ino)
				if !seen[name] {
					seen[name] = true
					others = append(others, name+" ("+b.Name()+")")
				}
			}
		}
	}
	slices.Sort(others)
	return others, nil
}
