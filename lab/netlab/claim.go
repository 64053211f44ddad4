package netlab

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// ClaimDir holds one claim file per live lab: which process made which
// namespaces and directories. A lab killed with SIGKILL cannot clean up;
// the next lab run removes what a dead process claimed. Several labs (and
// other users of perfscope-* names) run at once on one machine, so
// staleness is decided only by a claim whose owner — pid and start time,
// so a reused pid does not count — is gone. A namespace without a claim is
// never touched.
var ClaimDir = "/run/perfscope"

// Claim is a claim file of this process.
type Claim struct {
	path string
}

// claimOwner identifies a process across pid reuse.
type claimOwner struct {
	pid   int
	start uint64 // starttime from /proc/PID/stat, in clock ticks since boot
}

func currentOwner() (claimOwner, error) {
	pid := os.Getpid()
	start, err := procfs.Default.ProcessStartTicks(pid)
	return claimOwner{pid: pid, start: start}, err
}

func (o claimOwner) alive() bool {
	start, err := procfs.Default.ProcessStartTicks(o.pid)
	return err == nil && start == o.start
}

// NewClaim records that this process owns namespaces (names) and
// directories (absolute paths), before it creates them.
func NewClaim(namespaces, dirs []string) (*Claim, error) {
	owner, err := currentOwner()
	if err != nil {
		return nil, fmt.Errorf("netlab: identify this process: %w", err)
	}
	if err := os.MkdirAll(ClaimDir, 0o700); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "owner %d %d\n", owner.pid, owner.start)
	for _, ns := range namespaces {
		fmt.Fprintf(&b, "netns %s\n", ns)
	}
	for _, d := range dirs {
		fmt.Fprintf(&b, "dir %s\n", d)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	path := filepath.Join(ClaimDir, "lab-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	_, werr := f.WriteString(b.String())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, fmt.Errorf("netlab: %w", werr)
	}
	return &Claim{path: path}, nil
}

// Release removes the claim: what it named is gone, or now belongs to the
// user (--keep).
func (c *Claim) Release() {
	if c != nil {
		os.Remove(c.path)
	}
}

// Stale is what RemoveStale removed.
type Stale struct {
	OwnerPID   int
	Namespaces []string
	Dirs       []string
}

// RemoveStale removes the namespaces and directories of claims whose
// owner has exited, and those claims.
func RemoveStale() ([]Stale, error) {
	entries, err := os.ReadDir(ClaimDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []Stale
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "lab-") {
			continue
		}
		path := filepath.Join(ClaimDir, e.Name())
		owner, nss, dirs, err := readClaim(path)
		if err != nil || owner.alive() {
			continue // unreadable claims are not ours to judge
		}
		s := Stale{OwnerPID: owner.pid}
		for _, ns := range nss {
			if !strings.HasPrefix(ns, Prefix) || strings.ContainsAny(ns, "/ ") {
				continue
			}
			out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput()
			switch {
			case err == nil:
				s.Namespaces = append(s.Namespaces, ns)
			case !strings.Contains(string(out), "No such file"):
				errs = append(errs, fmt.Errorf("netlab: delete stale %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
			}
		}
		for _, d := range dirs {
			if filepath.IsAbs(d) && strings.HasPrefix(filepath.Base(d), "perfscope-") {
				if _, err := os.Stat(d); err == nil && os.RemoveAll(d) == nil {
					s.Dirs = append(s.Dirs, d)
				}
			}
		}
		os.Remove(path)
		if len(s.Namespaces)+len(s.Dirs) > 0 {
			removed = append(removed, s)
		}
	}
	return removed, errors.Join(errs...)
}

func readClaim(path string) (owner claimOwner, nss, dirs []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return owner, nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "owner":
			p, s, _ := strings.Cut(rest, " ")
			owner.pid, err = strconv.Atoi(p)
			if err == nil {
				owner.start, err = strconv.ParseUint(s, 10, 64)
			}
			if err != nil {
				return owner, nil, nil, fmt.Errorf("%s: bad owner line", path)
			}
		case "netns":
			nss = append(nss, rest)
		case "dir":
			dirs = append(dirs, rest)
		}
	}
	if owner.pid <= 0 {
		return owner, nil, nil, fmt.Errorf("%s: no owner", path)
	}
	return owner, nss, dirs, sc.Err()
}
