package netdev

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/gosafe"
)

// NamespaceMatch says in which other network namespace an interface was
// found.
type NamespaceMatch struct {
	Interface string `json:"interface"`
	// Name is the named namespace (/run/netns/NAME) when it has one.
	Name string `json:"name,omitempty"`
	// PID and Comm are a process inside the namespace, when it was found
	// through a process rather than a name.
	PID  int    `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
}

// RunHint is the command prefix that runs perfscope inside the namespace.
func (m NamespaceMatch) RunHint() string {
	if m.Name != "" {
		return "ip netns exec " + m.Name + " perfscope"
	}
	return fmt.Sprintf("nsenter --net=/proc/%d/ns/net perfscope", m.PID)
}

// NamespaceSearch looks for an interface in the network namespaces other
// than perfscope's own. It is bounded: named namespaces first, then at most
// MaxProcesses processes, each namespace read once.
type NamespaceSearch struct {
	FS FS
	// NamedDirs are the directories of named namespaces (iproute2 uses
	// /run/netns; /var/run/netns is usually a symlink to it).
	NamedDirs []string
	// MaxProcesses bounds the /proc scan; hosts with containers can run tens
	// of thousands of processes, almost all sharing a few namespaces.
	MaxProcesses int
	// ReadNamed lists the interfaces in the namespace bound at path. Named
	// namespaces have no process to read /proc/PID/net/dev from, so the live
	// implementation enters them (setns, needs CAP_SYS_ADMIN). nil skips
	// named namespaces.
	ReadNamed func(path string) ([]string, error)
}

// LiveNamespaceSearch searches the running system.
func LiveNamespaceSearch() NamespaceSearch {
	return NamespaceSearch{
		FS:           Default,
		NamedDirs:    []string{"/run/netns", "/var/run/netns"},
		MaxProcesses: 4096,
		ReadNamed:    interfacesInNamespace,
	}
}

// Find returns where iface lives, or nil when no other namespace perfscope
// can see has it. Namespaces it cannot read (no privilege, processes that
// exit meanwhile) are skipped: this is a hint for an error message, not an
// inventory.
func (s NamespaceSearch) Find(iface string) (*NamespaceMatch, error) {
	self, _ := os.Readlink(s.FS.Path("/proc/self/ns/net"))
	seen := map[string]bool{self: true}

	if s.ReadNamed != nil {
		for _, dir := range s.NamedDirs {
			entries, err := os.ReadDir(s.FS.Path(dir))
			if err != nil {
				continue
			}
			for _, e := range entries {
				path := s.FS.Path(filepath.Join(dir, e.Name()))
				id := namespaceID(path)
				if id != "" && seen[id] {
					continue
				}
				seen[id] = true
				names, err := s.ReadNamed(path)
				if err == nil && contains(names, iface) {
					return &NamespaceMatch{Interface: iface, Name: e.Name()}, nil
				}
			}
		}
	}

	pids, err := s.pids()
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		id, err := os.Readlink(s.FS.Path(fmt.Sprintf("/proc/%d/ns/net", pid)))
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		f, err := s.FS.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
		if err != nil {
			continue
		}
		names, err := parseNetDev(f)
		f.Close()
		if err == nil && contains(names, iface) {
			comm, _ := s.FS.ReadString(fmt.Sprintf("/proc/%d/comm", pid))
			return &NamespaceMatch{Interface: iface, PID: pid, Comm: strings.TrimSpace(comm)}, nil
		}
	}
	return nil, nil
}

func (s NamespaceSearch) pids() ([]int, error) {
	entries, err := os.ReadDir(s.FS.Path("/proc"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	if s.MaxProcesses > 0 && len(pids) > s.MaxProcesses {
		pids = pids[:s.MaxProcesses]
	}
	return pids, nil
}

// namespaceID names a bound namespace file the way /proc/PID/ns/net links
// do ("net:[4026532281]"), so a named namespace that a process also uses is
// read once.
func namespaceID(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// parseNetDev returns the interface names of a /proc/net/dev table.
func parseNetDev(r io.Reader) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(r)
	for line := 0; sc.Scan(); line++ {
		if line < 2 { // two header lines
			continue
		}
		name, _, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("net/dev line %d: no ':'", line+1)
		}
		names = append(names, strings.TrimSpace(name))
	}
	return names, sc.Err()
}

// interfacesInNamespace enters the namespace bound at path and reads
// /proc/thread-self/net/dev, which follows the calling thread's namespace
// (sysfs does not: it shows the mounter's). It runs on its own goroutine
// with the OS thread locked, so that if returning to the original namespace
// fails the goroutine ends still locked and the runtime discards the thread
// instead of reusing it for unrelated work.
func interfacesInNamespace(path string) ([]string, error) {
	var names []string
	err := InNamespace(path, func() error {
		var err error
		names, err = readNetDev("/proc/thread-self/net/dev")
		return err
	})
	return names, err
}

// InNamespace runs fn on an OS thread that has entered the network
// namespace at path (/proc/PID/ns/net), and returns the thread to
// perfscope's own namespace afterwards: what fn opens under /proc/sys/net
// or /proc/thread-self/net, and the sockets it creates, are that
// namespace's. If the return fails the goroutine ends still locked and
// the runtime discards the thread instead of reusing it for unrelated
// work; a panic in fn does the same.
func InNamespace(path string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- gosafe.Call(func() error {
			restored, err := runInNamespace(path, fn)
			if restored {
				runtime.UnlockOSThread()
			}
			return err
		})
	}()
	return <-done
}

func runInNamespace(path string, fn func() error) (restored bool, err error) {
	target, err := os.Open(path)
	if err != nil {
		return true, err
	}
	defer target.Close()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return true, err
	}
	defer orig.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, errors.Join(fnErr, fmt.Errorf("return to own network namespace: %w", err))
	}
	return true, fnErr
}

func readNetDev(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseNetDev(f)
}
