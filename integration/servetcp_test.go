package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
)

// perfscope serve with the tcp-rx recipe in a network namespace of the
// test's own, against nginx (Debian's nginx-light, listen backlog 8)
// stopped while 24 ab clients connect at once, then one connection
// aborted with a reset: the scrape's listen overflows add up to the
// namespace's TcpExtListenOverflows (nstat) and sit on nginx's listener,
// the retransmits by kind to TcpRetransSegs, the resets sent to
// TcpOutRsts; nothing is left behind.
func TestServeTCPMetrics(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	nginx := testutil.RequireTool(t, "nginx", "scripts/deps.sh test installs nginx-light")
	ab := testutil.RequireTool(t, "ab", "scripts/deps.sh test installs apache2-utils")
	bin := Perfscope(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("perfscope-st-%d", os.Getpid())
	exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	inNS := func(argv ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return c
	}
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, "127.0.0.1")), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := inNS(nginx, "-c", conf, "-p", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	pid := srv.Process.Pid // ip netns exec execs nginx
	defer func() {
		syscall.Kill(pid, syscall.SIGCONT)
		srv.Process.Kill()
		srv.Wait()
	}()

	serve := inNS(bin, "serve", "--recipe", "tcp-rx", "--set", "iface=lo", "--set", "profile=false",
		"--listen", "127.0.0.1:0", "--interval", "1s")
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	addr := make(chan string, 1)
	var log strings.Builder
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		listening := regexp.MustCompile(`metrics at http://([^/]+)/metrics`)
		r := bufio.NewReader(stderr)
		for {
			line, err := r.ReadString('\n')
			log.WriteString(line)
			if m := listening.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
			if err != nil {
				return
			}
		}
	}()
	// Scrapes dial from a thread in the namespace: serve listens on its
	// loopback.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, a string) (c net.Conn, err error) {
			err = testutil.InNetns(ns, func() error {
				c, err = net.DialTimeout(network, a, 5*time.Second)
				return err
			})
			return c, err
		}}}
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not listen within 60 s")
	}
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
				var v float64
				if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
					out[line[:i]] = v
				}
			}
		}
		return out
	}
	awaitWindows := func(n float64) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			m := scrape()
			if m[`perfscope_windows_total{recipe="tcp-rx"}`] >= n {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %v windows within 60 s:\n%s", n, log.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	first := awaitWindows(2)

	// The burst: nginx stops, 24 ab processes connect at once (9 fit in
	// the queue, the others' handshakes overflow and are retried), nginx
	// resumes 2 s later and serves them all.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	loads := make([]*exec.Cmd, 24)
	outs := make([]strings.Builder, len(loads))
	for i := range loads {
		loads[i] = inNS(ab, "-q", "-n", "1", "-c", "1", "-s", "20", "http://127.0.0.1:8080/")
		loads[i].Stdout, loads[i].Stderr = &outs[i], &outs[i]
		if err := loads[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	syscall.Kill(pid, syscall.SIGCONT)
	for i, l := range loads {
		if err := l.Wait(); err != nil {
			t.Fatalf("ab: %v\n%s", err, outs[i].String())
		}
	}
	// One connection aborted (SO_LINGER 0): a reset sent and received.
	if err := testutil.InNetns(ns, func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:8080", 5*time.Second)
		if err != nil {
			return err
		}
		c.(*net.TCPConn).SetLinger(0)
		return c.Close()
	}); err != nil {
		t.Fatal(err)
	}
	// Quiet: every count is in a completed window.
	m := awaitWindows(scrape()[`perfscope_windows_total{recipe="tcp-rx"}`] + 3)
	out, err := inNS("nstat", "-az", "--json", "TcpExtListenOverflows", "TcpRetransSegs", "TcpOutRsts").Output()
	if err != nil {
		t.Fatalf("nstat: %v", err)
	}
	var kernel struct {
		Kernel map[string]float64 `json:"kernel"`
	}
	if err := json.Unmarshal(out, &kernel); err != nil {
		t.Fatalf("nstat json: %v\n%s", err, out)
	}
	t.Logf("kernel %v; before the burst overflows %v", kernel.Kernel, first[`perfscope_tcp_listen_overflows_total{listener="127.0.0.1:8080"}`])
	sumOf := func(prefix string) (s float64) {
		for k, v := range m {
			if strings.HasPrefix(k, prefix+"{") || k == prefix {
				s += v
			}
		}
		return s
	}
	nginxListener := `{listener="127.0.0.1:8080"}`
	if got, want := sumOf("perfscope_tcp_listen_overflows_total"), kernel.Kernel["TcpExtListenOverflows"]; got != want || got == 0 {
		t.Errorf("listen overflows %v, the namespace's %v (want equal, above 0)", got, want)
	}
	if v := m["perfscope_tcp_listen_overflows_total"+nginxListener]; v == 0 {
		t.Errorf("no overflows on nginx's listener: %v", m)
	}
	if v := m["perfscope_tcp_listener_full_samples_total"+nginxListener]; v == 0 {
		t.Error("nginx's accept queue never seen full")
	}
	if v := m["perfscope_tcp_listener_backlog"+nginxListener]; v != 8 {
		t.Errorf("nginx's backlog %v, want 8", v)
	}
	// The probe counts retransmit events, the kernel segments: an event
	// may carry more than one segment (32 segments in 30 events in one
	// CI run); the segments themselves are compared just below.
	if got, want := sumOf("perfscope_tcp_retransmits_total"), kernel.Kernel["TcpRetransSegs"]; got > want || got == 0 {
		t.Errorf("retransmits by kind add up to %v events, the namespace's RetransSegs %v (want above 0, at most the segments)", got, want)
	}
	if got, want := m["perfscope_tcp_retransmitted_segments_total"], kernel.Kernel["TcpRetransSegs"]; got != want {
		t.Errorf("retransmitted segments %v, nstat %v", got, want)
	}
	if got, want := m[`perfscope_tcp_resets_total{direction="sent"}`], kernel.Kernel["TcpOutRsts"]; got != want || got == 0 {
		t.Errorf("resets sent %v, the namespace's OutRsts %v (want equal, above 0)", got, want)
	}
	if v := m[`perfscope_tcp_resets_total{direction="received"}`]; v == 0 {
		t.Error("no reset received")
	}
	for k := range m {
		if strings.HasPrefix(k, `perfscope_section_unavailable{section="tcp_`) {
			t.Errorf("%s", k)
		}
	}
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		<-logged
		t.Fatalf("serve: %v\n%s", err, log.String())
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
