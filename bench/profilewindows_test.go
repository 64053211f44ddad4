package bench

import (
	"os/exec"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes/cpuprofile"
)

// BenchmarkProfileWindows is weeks of a served profile in a minute: a
// count hash of 1,024 keys instead of 40,960, and every window new
// short-lived processes (new pids, so new tuples), read 30 times the
// way serve did before (a cumulative snapshot minus the last) and the way
// it does now (Drain). It reports the samples lost over the last 10
// windows and the tuples the kernel's count hash holds at the end.
func BenchmarkProfileWindows(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.LockBPF(b)
	for _, mode := range []string{"snapshot", "drain"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p, err := cpuprofile.Open(cpuprofile.Options{Frequency: 99, CountEntries: 1024, Continuous: mode == "drain"})
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Start(); err != nil {
					p.Close()
					b.Fatal(err)
				}
				var prev cpuprofile.Profile
				var lostLate, samples uint64
				const windows = 30
				for w := 0; w < windows; w++ {
					var cmds []*exec.Cmd
					for j := 0; j < 8; j++ {
						c := exec.Command("sh", "-c", "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done")
						if err := c.Start(); err != nil {
							b.Fatal(err)
						}
						cmds = append(cmds, c)
					}
					for _, c := range cmds {
						c.Wait()
					}
					time.Sleep(100 * time.Millisecond)
					var win cpuprofile.Profile
					if mode == "drain" {
						win, err = p.Drain()
					} else {
						var now cpuprofile.Profile
						now, err = p.Snapshot()
						win, prev = now.Sub(prev), now
					}
					if err != nil {
						b.Fatal(err)
					}
					if w >= windows-10 {
						lostLate += win.Lost.Total()
						samples += win.Total()
					}
				}
				held, err := p.Snapshot()
				p.Close()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(lostLate), "lost-in-last-10-windows")
				b.ReportMetric(float64(samples), "kept-in-last-10-windows")
				b.ReportMetric(float64(len(held.Samples)), "tuples-in-kernel-at-end")
			}
		})
	}
}
