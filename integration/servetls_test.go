package integration

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/perfscope/perfscope/internal/testutil"
)

// perfscope serve with a --web.config.file (TLS and basic auth, the
// exporter toolkit's format) as a Prometheus scrapes it: over TLS verified
// against the test's CA, with the password; without it, refused; SIGTERM
// ends it cleanly.
func TestServeWithWebConfig(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	dir := t.TempDir()
	ca := testutil.NewCA(t, "perfscope test CA")
	ca.LeafFiles(t, dir, "serve")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	os.WriteFile(web, []byte("tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600)

	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	serve := exec.Command(Perfscope(t), "serve", "--recipe", "softirq-balance", "--listen", "127.0.0.1:0", "--interval", "1s", "--web.config.file", web)
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Process.Kill()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var start string
	select {
	case start = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start within 60 s")
	}
	m := regexp.MustCompile(`metrics at https://([^/]+)/metrics \(at most \d+ connections at once, basic auth\)$`).FindStringSubmatch(start)
	if m == nil {
		t.Fatalf("start line %q: want https and basic auth", start)
	}
	base := "https://" + m[1]
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	fetch := func(path, password string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if password != "" {
			req.SetBasicAuth("prometheus", password)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := fetch("/readyz", "s3cret"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve not ready within 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := fetch("/metrics", "s3cret"); code != 200 || !strings.Contains(body, "perfscope_softirq_total{") {
		t.Errorf("scrape with the password: %d, softirq counters present: %v", code, strings.Contains(body, "perfscope_softirq_total{"))
	}
	for _, pw := range []string{"", "wrong"} {
		if code, body := fetch("/metrics", pw); code != 401 || strings.Contains(body, "perfscope_") {
			t.Errorf("scrape with password %q: %d", pw, code)
		}
	}
	serve.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20 s of SIGTERM")
	}
	for l := range lines {
		if strings.Contains(l, "web config") || strings.Contains(l, "warning") {
			t.Errorf("stderr: %s", l)
		}
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
