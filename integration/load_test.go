package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

type loadReport struct {
	Schema   string        `json:"schema"`
	Command  string        `json:"command"`
	Data     evidence.Load `json:"data"`
	Findings []struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
		Title    string `json:"title"`
	} `json:"findings"`
}

// runLoad runs `perfscope load args... -o json` to the end and decodes it.
func runLoad(t *testing.T, args ...string) loadReport {
	t.Helper()
	cmd := exec.Command(Perfscope(t), append([]string{"load", "-o", "json"}, args...)...)
	var stderr []byte
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		t.Fatalf("perfscope load %v: %v\n%s", args, err, stderr)
	}
	var r loadReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	for _, l := range r.Data.Levels {
		line := fmt.Sprintf("concurrency %d: %.1f/s p50 %v p99 %v errors %d, service %.2f CPUs, busy %.2f", l.Concurrency, l.RPS,
			time.Duration(l.P50Ns), time.Duration(l.P99Ns), l.Errors, l.ServiceCPU, l.CPUBusy)
		if th := l.Threads; th != nil {
			line += fmt.Sprintf("; %d threads on %.2f run %.2f blocked %.2f", th.Threads, th.OnCPUShare, th.RunnableShare, th.BlockedShare)
			for _, w := range th.Waits {
				line += fmt.Sprintf("; %s %s %.2f threads", w.Reason, w.Site, w.Threads)
			}
		}
		t.Log(line)
	}
	if k := r.Data.Knee; k != nil {
		t.Logf("knee %d (flat %d): %s %s — %s", k.Concurrency, k.Flat, k.Reason, k.Site, k.Why)
	}
	return r
}

// perfscope load against a server whose every request holds one mutex
// for 10 ms: throughput cannot pass 100 requests/s, so it stops rising at
// concurrency 1 and the requests added at 2 and 4 wait at the lock. The
// service is found from the URL's port, the knee is 1, its cause the lock
// at its call site, and nothing stays loaded after the run.
func TestLoadKneeAtALock(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	hold := 10 * time.Millisecond
	srv, url := testutil.StartLockServer(t, hold, 2*time.Minute)
	r := runLoad(t, "--url", url, "--concurrency", "1,2,4", "--duration-per-level", "2s")
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)

	ev := r.Data
	if r.Command != "load" || ev.PIDFrom != "port" || !slices.Equal(ev.PIDs, []int{srv.Process.Pid}) || ev.AttachMethod == "" || len(ev.Levels) != 3 {
		t.Fatalf("envelope: command %q, pids %v from %q (want [%d] from the port), method %q, %d levels", r.Command, ev.PIDs, ev.PIDFrom,
			srv.Process.Pid, ev.AttachMethod, len(ev.Levels))
	}
	for _, l := range ev.Levels {
		if l.Errors != 0 || l.RPS <= 0 || l.RPS > 1.05*float64(time.Second/hold) || l.Threads == nil {
			t.Errorf("concurrency %d: %.1f requests/s (at most %d possible), %d errors, threads %v", l.Concurrency, l.RPS, time.Second/hold, l.Errors, l.Threads)
		}
	}
	k := ev.Knee
	if k == nil || k.Concurrency != 1 || k.Flat != 2 || k.Reason != "lock" || k.Site != testutil.WaitForLockFunction {
		t.Fatalf("knee %+v: want concurrency 1, flat at 2, a lock at %s", k, testutil.WaitForLockFunction)
	}
	if len(r.Findings) != 1 || r.Findings[0].ID != "load.knee" || r.Findings[0].Severity != "warn" {
		t.Errorf("findings %+v: want one load.knee warning", r.Findings)
	}
}

// freePort is a TCP port of 127.0.0.1 nobody listens on (now).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// perfscope load against Debian's nginx with a master and two workers on
// loopback: the service is the three processes holding the port, every
// level is served without errors, and where the levels stop scaling the
// cause is the CPUs (nginx answers from memory; perfscope's own load
// generator shares the two CPUs).
func TestLoadNginx(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	nginx := testutil.RequireTool(t, "nginx", "scripts/deps.sh test installs nginx-light")
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`daemon off;
worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	server {
		listen 127.0.0.1:%[2]d;
		location / { return 200 "ok\n"; }
	}
}
`, dir, port)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(nginx, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	// Its own process group: the workers go with the master. SIGKILL of
	// the master alone left its two workers running after the test.
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
		srv.Wait()
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx did not listen in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the workers start after the master listens
	r := runLoad(t, "--url", url, "--concurrency", "1,4,16,64", "--duration-per-level", "2s")
	ev := r.Data
	if ev.PIDFrom != "port" || len(ev.PIDs) != 3 || !slices.Contains(ev.PIDs, srv.Process.Pid) || len(ev.Levels) != 4 {
		t.Fatalf("pids %v from %q, %d levels: want nginx's master %d and two workers, found from the port", ev.PIDs, ev.PIDFrom, len(ev.Levels), srv.Process.Pid)
	}
	for _, l := range ev.Levels {
		if l.Errors != 0 || l.RPS <= 0 || l.ServiceCPU <= 0 || l.Threads == nil || l.Threads.Threads < 3 {
			t.Errorf("concurrency %d: %.1f requests/s, %d errors, service CPU %.2f, threads %+v", l.Concurrency, l.RPS, l.Errors, l.ServiceCPU, l.Threads)
		}
	}
	if k := ev.Knee; k != nil && k.Reason != "cpu" {
		t.Errorf("knee %+v: nginx answering from memory stops at the CPUs", k)
	}
}
