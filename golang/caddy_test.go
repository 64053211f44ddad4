package golang

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
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

// freePort is a loopback TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promCounters reads Go runtime counters from a Prometheus text page.
func promCounters(t *testing.T, url string, names ...string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		for _, n := range names {
			if f[0] == n {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %v", sc.Text(), err)
				}
				out[n] = v
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Fatalf("%s does not publish %s", url, n)
		}
	}
	return out
}

// Debian's caddy — a Go HTTP server built by Debian (Go 1.19, stripped,
// cgo) — driven by ab, measured at the runtime's default sampling
// rate, against the runtime's own totals that caddy's admin API publishes
// (go_memstats_alloc_bytes_total, go_gc_duration_seconds_count from the
// Prometheus Go collector): bytes per request within 10 %, GC cycles
// exact.
func TestMeasureDebianCaddy(t *testing.T) {
	testutil.RequireRoot(t)
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatal("caddy is not installed: run scripts/deps.sh test")
	}
	ab, err := exec.LookPath("ab")
	if err != nil {
		t.Fatal("ab (apache2-utils) is not installed: run scripts/deps.sh test")
	}
	testutil.LockBPF(t)
	dir := t.TempDir()
	port, admin := freePort(t), freePort(t)
	conf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(conf, []byte(fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n}\nhttp://127.0.0.1:%d {\n\trespond \"hello from caddy\"\n}\n", admin, port)), 0o644)
	cmd := exec.Command(caddy, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	site := fmt.Sprintf("http://127.0.0.1:%d/", port)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", admin)
	for i := 0; ; i++ {
		if resp, err := http.Get(site); err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			t.Fatal("caddy did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	const n = 80000
	run := func(n int) error {
		out, err := exec.Command(ab, "-q", "-n", strconv.Itoa(n), "-c", "4", site).CombinedOutput()
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("Complete requests:      %d", n)) || !strings.Contains(string(out), "Failed requests:        0") {
			return fmt.Errorf("ab: %v\n%s", err, out)
		}
		return nil
	}
	if err := run(2000); err != nil { // warm up
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	names := []string{"go_memstats_alloc_bytes_total", "go_gc_duration_seconds_count"}
	var before map[string]float64
	loaded := make(chan error, 1)
	res, err := Measure(context.Background(), Options{PID: cmd.Process.Pid, Duration: 40 * time.Second, Requests: n, NoPools: true,
		Started: func() {
			before = promCounters(t, metrics, names...)
			go func() { loaded <- run(n) }()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	after := promCounters(t, metrics, names...)
	e := res.Evidence
	want := (after[names[0]] - before[names[0]]) / n
	gcs := after[names[1]] - before[names[1]]
	t.Logf("caddy %s (%+v): %.0f ± %.0f bytes/request from %d samples at rate %d (%s: %s); runtime %.0f; GC cycles %d, runtime %.0f",
		e.Binary.GoVersion, e.Binary, *e.BytesPerRequest, *e.BytesPerRequestError, e.Sampling.Samples, e.Sampling.MemProfileRate, e.Sampling.RateSource, e.Sampling.RateNote, want, e.GCCycles, gcs)
	within(t, "caddy's bytes per request", *e.BytesPerRequest, want, 0.10)
	if float64(e.GCCycles) != gcs {
		t.Errorf("GC cycles %d, caddy's runtime counted %.0f", e.GCCycles, gcs)
	}
	if len(e.Sites) == 0 {
		t.Error("no allocation site in caddy")
	} else {
		t.Logf("top sites: %s %d B %.0f B/req; %s %d B %.0f B/req", e.Sites[0].Function, e.Sites[0].Size, *e.Sites[0].BytesPerRequest, e.Sites[1].Function, e.Sites[1].Size, *e.Sites[1].BytesPerRequest)
	}
}
