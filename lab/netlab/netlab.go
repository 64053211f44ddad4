// Package netlab builds perfscope's network lab: two network namespaces
// joined by a multi-queue veth pair, the receiver side with GRO and
// rx-udp-gro-forwarding on so that veth runs one NAPI instance per RX queue
// (the closest a single machine gets to a multi-queue NIC). Addresses are
// from 198.18.0.0/15, the range RFC 2544 sets aside for benchmark labs; the
// traffic never leaves the two namespaces. Close removes everything, and so
// does a lab that fails half-way through New.
package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config describes a lab.
type Config struct {
	// Queues is the number of RX and TX queues on each veth end.
	Queues int
	// NoGRO leaves GRO off on the receiver: veth then has no per-queue
	// NAPI, as on a plain veth.
	NoGRO bool
}

// Lab is a built lab.
type Lab struct {
	ID           string
	SenderNS     string
	ReceiverNS   string
	SenderIf     string
	ReceiverIf   string
	SenderAddr   netip.Addr
	ReceiverAddr netip.Addr
	Queues       int

	mu    sync.Mutex
	procs []*exec.Cmd
	claim *Claim
}

// Prefix starts every namespace a lab creates, so leftovers of a killed run
// can be found (`ip netns list | grep perfscope-`).
const Prefix = "perfscope-"

// New builds a lab. It needs root, iproute2 and ethtool.
func New(ctx context.Context, cfg Config) (*Lab, error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 4
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("netlab needs %s (apt-get install iproute2 ethtool): %w", tool, err)
		}
	}
	var b [3]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	l := &Lab{
		ID: id, SenderNS: Prefix + "s-" + id, ReceiverNS: Prefix + "r-" + id,
		SenderIf: "va", ReceiverIf: "vb",
		SenderAddr: netip.MustParseAddr("198.18.0.1"), ReceiverAddr: netip.MustParseAddr("198.18.0.2"),
		Queues: cfg.Queues,
	}
	// Claim the names before creating them: if this process is killed,
	// the next lab run removes them (RemoveStale).
	claim, err := NewClaim([]string{l.SenderNS, l.ReceiverNS}, nil)
	if err != nil {
		return nil, err
	}
	l.claim = claim
	q := fmt.Sprint(cfg.Queues)
	steps := [][]string{
		{"ip", "netns", "add", l.SenderNS},
		{"ip", "netns", "add", l.ReceiverNS},
		// Distinct ifindexes: in two fresh namespaces both ends would be
		// ifindex 2. The queue probe tells devices apart by namespace too,
		// but ethtool output and logs are easier to read this way.
		{"ip", "link", "add", "name", l.SenderIf, "index", "40", "netns", l.SenderNS, "numtxqueues", q, "numrxqueues", q,
			"type", "veth", "peer", "name", l.ReceiverIf, "index", "41", "netns", l.ReceiverNS, "numtxqueues", q, "numrxqueues", q},
		{"ip", "-n", l.SenderNS, "addr", "add", l.SenderAddr.String() + "/24", "dev", l.SenderIf},
		{"ip", "-n", l.ReceiverNS, "addr", "add", l.ReceiverAddr.String() + "/24", "dev", l.ReceiverIf},
		{"ip", "-n", l.SenderNS, "link", "set", "lo", "up"},
		{"ip", "-n", l.ReceiverNS, "link", "set", "lo", "up"},
		{"ip", "-n", l.SenderNS, "link", "set", l.SenderIf, "up"},
		{"ip", "-n", l.ReceiverNS, "link", "set", l.ReceiverIf, "up"},
	}
	if !cfg.NoGRO {
		steps = append(steps, []string{"ip", "netns", "exec", l.ReceiverNS, "ethtool", "-K", l.ReceiverIf, "gro", "on", "rx-udp-gro-forwarding", "on"})
	}
	for _, s := range steps {
		if err := runCommand(ctx, s); err != nil {
			l.Close()
			return nil, fmt.Errorf("netlab: %w", err)
		}
	}
	// operstate turns "up" asynchronously (linkwatch runs up to a second
	// after the link comes up); wait so that the lab is usable on return.
	for _, end := range [][2]string{{l.SenderNS, l.SenderIf}, {l.ReceiverNS, l.ReceiverIf}} {
		if err := l.waitUp(ctx, end[0], end[1]); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// runCommand runs argv on the host (ip -n, ip netns exec) and says which
// command failed, with its output.
func runCommand(ctx context.Context, argv []string) error {
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (l *Lab) waitUp(ctx context.Context, ns, dev string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-o", "link", "show", dev).Output()
		if err == nil && strings.Contains(string(out), "state UP") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: %s in %s is not up after 5s: %s", dev, ns, strings.TrimSpace(string(out)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Command prepares argv to run inside namespace ns (with the namespace's
// /sys, as `ip netns exec` remounts it). Processes started with Start are
// killed by Close.
func (l *Lab) Command(ctx context.Context, ns string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	// Pdeathsig: a lab killed with SIGKILL takes its servers and floods
	// with it (`ip netns exec` execs the command, which keeps the setting).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Interrupt first so children (perfscope) can clean up their probes.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Start starts cmd and remembers it for Close.
func (l *Lab) Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	return nil
}

// Run runs argv in ns and returns its combined output.
func (l *Lab) Run(ctx context.Context, ns string, argv ...string) (string, error) {
	out, err := l.Command(ctx, ns, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(argv, " "), ns, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// WriteSys writes value to a /sys or /proc/sys path as seen from ns.
func (l *Lab) WriteSys(ctx context.Context, ns, path, value string) error {
	_, err := l.Run(ctx, ns, "sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
	return err
}

// Close stops every process the lab started and deletes both namespaces
// (which destroys the veth pair).
func (l *Lab) Close() error {
	l.Stop()
	var errs []error
	for _, ns := range []string{l.SenderNS, l.ReceiverNS} {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil &&
			!strings.Contains(string(out), "No such file") {
			errs = append(errs, fmt.Errorf("netlab: delete %s: %v: %s", ns, err, strings.TrimSpace(string(out))))
		}
	}
	if len(errs) == 0 {
		l.claim.Release()
	}
	return errors.Join(errs...)
}

// Disown hands the namespaces to the user (--keep): no later lab run
// removes them as stale.
func (l *Lab) Disown() { l.claim.Release() }

// End ends a lab scenario's use of the lab: Close, or with keep (a lab
// run's --keep) Stop and Disown, leaving the namespaces to the user.
func (l *Lab) End(keep bool) error {
	if keep {
		l.Stop()
		l.Disown()
		return nil
	}
	return l.Close()
}

// Stop stops every process the lab started (SIGINT, then SIGKILL after 10
// s) and leaves the namespaces, for a user who wants to look around.
func (l *Lab) Stop() {
	l.mu.Lock()
	procs := l.procs
	l.procs = nil
	l.mu.Unlock()
	for _, p := range procs {
		if p.Process != nil && p.ProcessState == nil {
			syscall.Kill(-p.Process.Pid, syscall.SIGINT)
		}
	}
	for _, p := range procs {
		if p.ProcessState == nil {
			done := make(chan struct{})
			go func() { p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	}
}

// Namespaces lists the lab namespaces that exist now (leftovers included).
func Namespaces() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, err
	}
	var ns []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], Prefix) {
			ns = append(ns, f[0])
		}
	}
	return ns, nil
}
