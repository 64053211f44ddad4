package apply

import (
	"errors"
	"fmt"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/diagnose"
)

// System executes typed changes natively. Each part sits behind a small
// interface so that the apply and revert logic is tested without root
// against fakes, and against the kernel in network namespaces as root.
type System struct {
	// Root prefixes /proc, /sys and /etc paths ("/" on a live host; a
	// fixture directory in tests).
	Root string
	// Live is true on a real host: written files must then be on sysfs or
	// procfs (a fixture root is a plain directory).
	Live       bool
	Ethtool    Ethtool
	Nft        Nftables
	Iptables   Iptables
	Modules    Modules
	Threads    Threads
	Audit      Audit
	Namespaces Namespaces
	NAPI       NAPIs
}

// LiveSystem is the host perfscope runs on, in the caller's network
// namespace.
func LiveSystem() *System {
	return &System{Root: "/", Live: true, Ethtool: ioctlEthtool{}, Nft: netlinkNftables{}, Iptables: sockoptIptables{},
		Modules: kernelModules{root: "/"}, Threads: kernelThreads{root: "/"}, Audit: netlinkAudit{}, Namespaces: procNamespaces{root: "/"}, NAPI: netlinkNAPIs{}}
}

// Ethtool reads and sets what `ethtool -K/-G/-C/-L/-X` do.
type Ethtool interface {
	Feature(iface, name string) (bool, error)
	SetFeature(iface, name string, on bool) error
	// Params are all parameters of a ring, coalesce or channels kind.
	Params(kind diagnose.ChangeKind, iface string) (map[string]uint32, error)
	// SetParams changes the named parameters and keeps the others.
	SetParams(kind diagnose.ChangeKind, iface string, p map[string]uint32) error
	RSSTable(iface string) ([]uint32, error)
	SetRSSTable(iface string, table []uint32) error
}

// Nftables reads, deletes and recreates tables. Table returns nil for a
// table that does not exist.
type Nftables interface {
	Table(family, name string) (*NftTable, error)
	Delete(family, name string) error
	Create(t NftTable) error
}

// Iptables reads a legacy table's shape (only while its module is loaded:
// asking for an absent table makes the kernel load it).
type Iptables interface {
	Table(family, name string) (IptablesTable, error)
}

// IptablesTable is what the guard of an unload needs: how many rules the
// table holds, its user-defined chains, and the built-in chains' policies.
type IptablesTable struct {
	Rules      int
	UserChains []string
	Policies   map[string]string // "INPUT": "ACCEPT"
}

// Modules loads and unloads kernel modules.
type Modules interface {
	Loaded(name string) (bool, error)
	// File finds the module's file (modules.dep) and its current
	// parameters, so that the revert loads it as it was.
	File(name string) (ModuleFile, error)
	Unload(name string) error
	Load(f ModuleFile) error
}

// Threads reads and sets a thread's CPU affinity.
type Threads interface {
	// Identity is the thread's start time and name; ok is false when no
	// such thread exists.
	Identity(tid int) (id ThreadIdentity, ok bool, err error)
	Affinity(tid int) (cpuset.Set, error)
	SetAffinity(tid int, cpus cpuset.Set) error
}

// Audit reads and sets the kernel audit "enabled" flag.
type Audit interface {
	Enabled() (uint32, error)
	SetEnabled(v uint32) error
}

// Namespaces lists network namespaces other than the caller's: kernel
// modules are host-wide, so unloading one is only judged safe when the
// caller's namespace is the only one.
type Namespaces interface {
	Others() ([]string, error)
}

// Saved is what a revert needs beyond a change's old value, captured at
// --apply and kept in the revert file.
type Saved struct {
	Nft    *NftTable       `json:"nft,omitempty"`
	Module *ModuleFile     `json:"module,omitempty"`
	Thread *ThreadIdentity `json:"thread,omitempty"`
	File   *FileCopy       `json:"file,omitempty"`
}

// ModuleFile is a module's file and the parameters it was loaded with.
type ModuleFile struct {
	Path   string `json:"path"`
	Params string `json:"params,omitempty"`
}

// ThreadIdentity tells a thread from a later one that reused its TID.
type ThreadIdentity struct {
	StartTime uint64 `json:"start_time"`
	Comm      string `json:"comm"`
}

// FileCopy is a configuration file as it was: contents, mode and owner.
type FileCopy struct {
	Contents string `json:"contents"`
	Mode     uint32 `json:"mode"`
	UID      int    `json:"uid"`
	GID      int    `json:"gid"`
}

// state is what a change's target holds now.
type state struct {
	value string
	saved *Saved
	// gone: the target no longer exists (a thread ended); goneWhy says
	// so in a sentence where the kind knows more.
	gone    bool
	goneWhy string
	// raw is kind-specific: the file contents of an irqbalance ban.
	raw string
}

// handler carries out one kind.
type handler interface {
	read(s *System, c diagnose.Change) (state, error)
	// guard refuses an apply that could not be undone or would change
	// more than the change names; it runs before anything changes.
	guard(s *System, c diagnose.Change, st state) error
	write(s *System, c diagnose.Change, value string, saved *Saved) error
	// same reports whether st holds value (saved: what --apply recorded).
	same(c diagnose.Change, value string, saved *Saved, st state) bool
}

func (s *System) handler(k diagnose.ChangeKind) (handler, error) {
	switch k {
	case diagnose.ChangeSysctl:
		return sysctlHandler{}, nil
	case diagnose.ChangeSysfs:
		return sysfsHandler{}, nil
	case diagnose.ChangeEthtoolFeature:
		return featureHandler{}, nil
	case diagnose.ChangeEthtoolRing, diagnose.ChangeEthtoolCoalesce, diagnose.ChangeEthtoolChannels:
		return paramsHandler{}, nil
	case diagnose.ChangeEthtoolRSS:
		return rssHandler{}, nil
	case diagnose.ChangeNftTable:
		return nftHandler{}, nil
	case diagnose.ChangeIptablesTable, diagnose.ChangeModule:
		return moduleHandler{}, nil
	case diagnose.ChangeThreadAffinity:
		return threadHandler{}, nil
	case diagnose.ChangeAudit:
		return auditHandler{}, nil
	case diagnose.ChangeIrqbalanceBan:
		return irqbalanceHandler{}, nil
	case diagnose.ChangeNAPI:
		return napiHandler{}, nil
	}
	return nil, fmt.Errorf("%w: no executor for kind %q", diagnose.ErrInvalidChange, k)
}

// errUnsupported marks a part the System was built without.
var errUnsupported = errors.New("not available on this system")

func need[T any](part T, what string) (T, error) {
	var zero T
	if any(part) == nil {
		return zero, fmt.Errorf("%s: %w", what, errUnsupported)
	}
	return part, nil
}

// noGuard is the guard of kinds whose old value is all a revert needs.
type noGuard struct{}

func (noGuard) guard(*System, diagnose.Change, state) error { return nil }
