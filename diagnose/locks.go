package diagnose

import (
	"fmt"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// LockInput is what the system-wide lock rules judge: kernel lock
// contention over a window on every CPU.
type LockInput struct {
	Locks      evidence.LockSection
	DurationNs int64
	// CPUs is how many CPUs the window's time is counted over.
	CPUs int
}

// LockThresholds are locks.contended's thresholds, which a recipe may
// override: the wait, summed over every waiter, as a share of all CPUs'
// time. 1 % is where the talk's socket lock started to cap throughput; at
// 5 % waiting is a visible part of the machine.
var LockThresholds = struct{ WaitWarn, WaitCrit Threshold }{
	WaitWarn: Threshold{Name: "warn_share", Default: 0.01, Min: 0, Max: 1,
		Doc: "kernel lock wait as a share of all CPUs' time that makes a warning"},
	WaitCrit: Threshold{Name: "crit_share", Default: 0.05, Min: 0, Max: 1,
		Doc: "the share that makes it critical"},
}

// LockRules are the rules of a system-wide lock-contention run.
var LockRules = []Rule[LockInput]{
	{ID: "locks.contended", Tunables: []Threshold{LockThresholds.WaitWarn, LockThresholds.WaitCrit}, CheckTuned: checkLocksContended},
}

func checkLocksContended(in LockInput, t Thresholds) *Finding {
	l := in.Locks
	if l.Unavailable != "" || in.DurationNs <= 0 || in.CPUs <= 0 || len(l.Sites) == 0 {
		return nil
	}
	share := float64(l.TotalNs) / (float64(in.DurationNs) * float64(in.CPUs))
	if share < t.Get(LockThresholds.WaitWarn) {
		return nil
	}
	top := l.Sites[0]
	var contentions uint64
	for _, s := range l.Sites {
		contentions += s.Count
	}
	topShare := 0.0
	if l.TotalNs > 0 {
		topShare = float64(top.TotalNs) / float64(l.TotalNs)
	}
	f := &Finding{
		Severity: Warn,
		Title: fmt.Sprintf("kernel lock wait is %s of all CPU time; %s of it at %s (%s)",
			pct(share), pct(topShare), top.Site, top.Class),
		Evidence: []string{
			fmt.Sprintf("%s waited for kernel locks in %s on %d CPUs (%d contentions)",
				time.Duration(l.TotalNs).Round(time.Microsecond), time.Duration(in.DurationNs).Round(time.Millisecond), in.CPUs, contentions),
		},
		Impact: min(share, 1),
	}
	if share >= t.Get(LockThresholds.WaitCrit) {
		f.Severity = Crit
	}
	for i, s := range l.Sites {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s (%s): %d contentions, %s waited, longest %s",
			s.Site, s.Class, s.Count, time.Duration(s.TotalNs).Round(time.Microsecond), time.Duration(s.MaxNs).Round(time.Microsecond)))
	}
	if len(l.Sockets) > 0 {
		s := l.Sockets[0]
		owner := ""
		if s.Socket.PID > 0 {
			owner = fmt.Sprintf(" of %s (pid %d)", s.Socket.Comm, s.Socket.PID)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("most contended socket: %s port %d%s, %s waited",
			s.Socket.Protocol, s.Socket.Port, owner, time.Duration(s.TotalNs).Round(time.Microsecond)))
	}
	if l.StackEvery > 1 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("per-site waits are estimates from 1 in %d stacks; the total is exact", l.StackEvery))
	}
	f.Recommendation = lockAdvice(top.Class)
	return f
}

// lockAdvice is what removes contention of the top site's lock class.
func lockAdvice(class string) Recommendation {
	switch class {
	case "socket-receive-queue", "socket-wakeup", "socket-lock":
		return Recommendation{
			Kind: KindCode,
			Why:  "Every CPU delivering to one socket takes the same receive-queue and wakeup locks; with many CPUs feeding it they spin on each other instead of delivering.",
			Code: []CodeSketch{{Lang: "c", Code: "int one = 1;\nsetsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one); /* one socket per receiving thread, same port */"}},
			Expected: "Splitting the socket with SO_REUSEPORT took Makita's server from 270k to 2.54M transactions/s once NET_RX was spread; " +
				"run the udp-rx recipe for the per-socket numbers and the steering that goes with it.",
			Reference: Makita2016,
		}
	case "qdisc-root-lock", "tx-queue-xmit-lock":
		return Recommendation{
			Kind: KindAdvice,
			Why:  "CPUs transmitting through the same TX queue serialise on its qdisc root lock and its xmit lock; XPS gives each CPU its own queue.",
			Expected: "With XPS each CPU transmits on its own queue and the qdisc lock stops being shared (Makita's XPS step); " +
				"run the udp-tx recipe for the per-queue numbers and the settings (finding net.xps-unset).",
			Reference: Makita2016,
		}
	}
	return Recommendation{
		Kind:     KindAdvice,
		Why:      "The stacks of the top sites (data.locks.sites[].stack) show which code path contends; the lock's holders are found by profiling the same window.",
		Expected: "Knowing the contending path: `perfscope profile --kernel-only` over the same load shows where the holders spend their time.",
	}
}
