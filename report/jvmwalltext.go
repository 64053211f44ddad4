package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// writeJVMWallText prints where the JVM's threads waited, pool by pool:
// async-profiler's wall-clock samples by Java frame and kind of wait,
// beside the kernel's off-CPU time, state and waker of the same pool.
func writeJVMWallText(w io.Writer, v evidence.JVMWall) {
	fmt.Fprintf(w, "\nWhere the JVM's threads wait: async-profiler wall clock (%s sampled) beside the kernel's off-CPU view\n", wallMs(v.WallNs))
	if len(v.Pools) == 0 {
		fmt.Fprintln(w, "  no thread was sampled")
	}
	for _, p := range v.Pools {
		fmt.Fprintf(w, "  %s (%d threads): wall %s, waiting %s (%s), running %s\n", p.Name, p.Threads, wallMs(p.WallNs), wallMs(p.WaitingNs), wallByWait(p.ByWait), wallMs(p.RunningNs))
		if k := p.OffCPU; k != nil {
			fmt.Fprintf(w, "    kernel: on CPU %s, runnable %s, blocked %s (%.0f %% of %s seen)", wallMs(k.OnCPUNs), wallMs(k.RunnableNs), wallMs(k.BlockedNs), 100*k.BlockedShare, wallMs(k.SeenNs))
			if k.TopSite != "" {
				fmt.Fprintf(w, "; longest at %s (%s, %s)", k.TopSite, k.TopSiteReason, wallMs(k.TopSiteNs))
				if k.TopSiteWaker != "" {
					fmt.Fprintf(w, " woken by %s", k.TopSiteWaker)
				}
			}
			fmt.Fprintln(w)
		} else {
			fmt.Fprintln(w, "    kernel: none of its threads switched in the window (or the off-CPU probe did not run)")
		}
		for i, f := range p.TopFrames {
			if i == 3 {
				break
			}
			fmt.Fprintf(w, "    %5.1f %%  %-8s %s\n", 100*f.Share, f.State, f.Frame)
		}
	}
	for _, s := range v.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", s)
	}
}

func wallMs(ns int64) string { return fmt.Sprintf("%.1f ms", float64(ns)/1e6) }

func wallByWait(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + wallMs(m[k])
	}
	return strings.Join(parts, ", ")
}
