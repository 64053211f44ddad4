package serve

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/measure"
)

func bcryptHash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadWebConfig(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "perfscope test CA")
	cert, key := ca.LeafFiles(t, dir, "serve")
	hash := bcryptHash(t, "s3cret")
	good := []struct {
		yaml string
		want WebConfig
	}{
		{"tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  prometheus: " + hash + "\n",
			WebConfig{TLS: true, BasicAuth: true}},
		// Relative paths are below the file's directory, as the toolkit
		// reads them.
		{"tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key + "\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: serve.crt\n",
			WebConfig{TLS: true, ClientCerts: true}},
		{"basic_auth_users:\n  prometheus: " + hash + "\n", WebConfig{BasicAuth: true}},
		{"http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n", WebConfig{}},
	}
	for i, c := range good {
		path := writeFile(t, filepath.Join(dir, "good.yml"), c.yaml)
		got, err := LoadWebConfig(path)
		c.want.Path = path
		if err != nil || got != c.want {
			t.Errorf("good %d: %+v %v, want %+v", i, got, err, c.want)
		}
	}
	bad := map[string]string{
		"unknown field":       "tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\n  no_such_field: 1\n",
		"not a bcrypt hash":   "basic_auth_users:\n  prometheus: s3cret\n",
		"missing certificate": "tls_server_config:\n  cert_file: nope.crt\n  key_file: serve.key\n",
		"key without cert":    "tls_server_config:\n  key_file: serve.key\n",
		"not YAML":            "tls_server_config: [\n",
		"key of another cert": "tls_server_config:\n  cert_file: serve.crt\n  key_file: other.key\n",
	}
	ca.LeafFiles(t, dir, "other")
	for name, text := range bad {
		path := writeFile(t, filepath.Join(dir, "bad.yml"), text)
		_, err := LoadWebConfig(path)
		if !errors.Is(err, measure.ErrBadInput) || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "--web.config.file "+path+": ") {
			t.Errorf("%s: %v, want one sentence of bad input naming the file", name, err)
		}
	}
	if _, err := LoadWebConfig(filepath.Join(dir, "absent.yml")); !errors.Is(err, measure.ErrBadInput) {
		t.Errorf("absent file: %v", err)
	}
}

// syncBuffer is a log the HTTP server's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serveWith serves a handler answering "metrics" with web on a loopback
// port, as Run does, and returns its address and error log.
func serveWith(t *testing.T, web *WebConfig) (string, *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	errLog := &httpErrors{w: log}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") }),
		ReadHeaderTimeout: time.Second, ErrorLog: stdlog.New(errLog, "", 0)}
	done := make(chan error, 1)
	go func() { done <- serveHTTP(hs, ln, web, errLog) }()
	t.Cleanup(func() {
		hs.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), log
}

func get(t *testing.T, c *http.Client, url, user, password string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A scrape over TLS, verified against the test's CA, with basic auth:
// the right password is served, a wrong one or none is refused, a client
// that does not trust the CA or speaks plain HTTP gets nothing; a changed
// password applies at the next request, and a file that stops parsing
// refuses scrapes and is said once.
func TestServeTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t, "perfscope test CA")
	ca.LeafFiles(t, dir, "serve")
	path := writeFile(t, filepath.Join(dir, "web.yml"),
		"tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  prometheus: "+bcryptHash(t, "s3cret")+"\n")
	web, err := LoadWebConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	addr, log := serveWith(t, &web)
	url := "https://" + addr + "/metrics"
	trusting := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	for _, c := range []struct {
		user, password string
		want           int
	}{{"prometheus", "s3cret", 200}, {"prometheus", "wrong", 401}, {"", "", 401}, {"intruder", "s3cret", 401}} {
		if code, err := get(t, trusting, url, c.user, c.password); err != nil || code != c.want {
			t.Errorf("%q/%q: %d %v, want %d", c.user, c.password, code, err, c.want)
		}
	}
	other := testutil.NewCA(t, "another CA")
	untrusting := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: other.Pool()}}}
	if _, err := get(t, untrusting, url, "prometheus", "s3cret"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client not trusting the CA: %v", err)
	}
	if code, err := get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+"/metrics", "prometheus", "s3cret"); err == nil && code == 200 {
		t.Error("plain HTTP was served on the TLS port")
	}

	// The toolkit reads the file again for each request.
	writeFile(t, path, "tls_server_config:\n  cert_file: serve.crt\n  key_file: serve.key\nbasic_auth_users:\n  prometheus: "+bcryptHash(t, "rotated")+"\n")
	if code, _ := get(t, trusting, url, "prometheus", "s3cret"); code != 401 {
		t.Errorf("the old password after rotation: %d", code)
	}
	if code, _ := get(t, trusting, url, "prometheus", "rotated"); code != 200 {
		t.Errorf("the new password after rotation: %d", code)
	}
	writeFile(t, path, "basic_auth_users: [\n")
	for i := 0; i < 3; i++ {
		if code, _ := get(t, trusting, url, "prometheus", "rotated"); code != 500 {
			t.Errorf("a broken web config: %d, want 500", code)
		}
	}
	if n := strings.Count(log.String(), "web config: Unable to parse configuration"); n != 1 {
		t.Errorf("the broken web config said %d times:\n%s", n, log)
	}
}

// Basic auth alone (the warning says its passwords travel in clear).
func TestServeBasicAuthWithoutTLS(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, "web.yml"), "basic_auth_users:\n  prometheus: "+bcryptHash(t, "s3cret")+"\n")
	web, err := LoadWebConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveWith(t, &web)
	c := &http.Client{Timeout: 5 * time.Second}
	if code, err := get(t, c, "http://"+addr+"/", "prometheus", "s3cret"); err != nil || code != 200 {
		t.Errorf("right password: %d %v", code, err)
	}
	if code, _ := get(t, c, "http://"+addr+"/", "prometheus", "nope"); code != 401 {
		t.Errorf("wrong password: %d", code)
	}
}
