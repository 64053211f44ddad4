package bench

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// BenchmarkFlameMemory draws a flame graph of a large generated folded
// file of mostly distinct stacks (bench/cmd/genfolded: FLAME_MEMORY_STACKS
// lines, default 4.4 M ≈ 2.1 GB, depth 10–40) with `perfscope flame FILE
// --out FILE.svg`, once per --max-memory in FLAME_MEMORY_LIMITS (MiB,
// default "1024 4096"), and reports the child's peak RSS, wall time and
// exit status: with the default cap the run stops with exit 2 at the line
// that crosses it; with a cap above what the input needs it draws the
// whole graph. Not run by CI (it writes ~2 GB to the temp directory).
func BenchmarkFlameMemory(b *testing.B) {
	stacks := envInt(b, "FLAME_MEMORY_STACKS", 4_400_000)
	bin := buildBinary(b)
	gen := filepath.Join(b.TempDir(), "genfolded")
	build := exec.Command("go", "build", "-o", gen, "./bench/cmd/genfolded")
	build.Dir = testutil.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build genfolded: %v\n%s", err, out)
	}
	dir := b.TempDir()
	input := filepath.Join(dir, "stacks.folded")
	f, err := os.Create(input)
	if err != nil {
		b.Fatal(err)
	}
	g := exec.Command(gen, "-stacks", strconv.Itoa(stacks), "-seed", "7")
	g.Stdout = f
	if err := g.Run(); err != nil {
		b.Fatalf("genfolded: %v", err)
	}
	f.Close()
	st, _ := os.Stat(input)
	limits := os.Getenv("FLAME_MEMORY_LIMITS")
	if limits == "" {
		limits = "1024 4096"
	}
	for _, limit := range strings.Fields(limits) {
		b.Run("max-memory="+limit, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(bin, "flame", input, "--out", filepath.Join(dir, "out.svg"), "--max-memory", limit)
				start := time.Now()
				err := cmd.Run()
				wall := time.Since(start)
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)/1024, "peak-rss-MB")
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(float64(code), "exit")
				b.ReportMetric(float64(st.Size())/1e6, "input-MB")
			}
		})
	}
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
