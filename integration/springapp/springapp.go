// Package springapp builds and runs perfscope's Spring Boot test service
// (Tomcat, Spring MVC, Jackson, logback with a file appender, Actuator with
// Micrometer's Prometheus registry): a real framework perfscope was not
// tuned on, with an in-app ThreadMXBean filter measuring each request's
// allocation as ground truth (GET /truth). The sources are embedded; the
// jar is built with Maven from the local repository (offline:
// scripts/deps.sh fetches what it needs) and cached by the sources'
// digest.
package springapp

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perfscope/perfscope/lab/jvmapp"
)

//go:embed pom.xml src
var sources embed.FS

// Digest names the sources, for the build cache.
func Digest() string {
	h := sha256.New()
	var names []string
	fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, _ := sources.ReadFile(n)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CacheDir is where built jars are kept.
func CacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "perfscope")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "perfscope")
	}
	return filepath.Join(os.TempDir(), "perfscope-cache")
}

// Build returns the service's jar, building it with Maven unless the
// cache has one for these sources. offline passes -o to Maven.
func Build(ctx context.Context, offline bool) (string, error) {
	jar := filepath.Join(CacheDir(), "springapp-"+Digest()+".jar")
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("building the Spring Boot test service needs Maven: %w", err)
	}
	dir, err := os.MkdirTemp("", "perfscope-springapp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := fs.WalkDir(sources, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, p), 0o755)
		}
		b, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	}); err != nil {
		return "", err
	}
	args := []string{"-B", "-q", "package", "-DskipTests"}
	if offline {
		args = append([]string{"-o"}, args...)
	}
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mvn %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 2000))
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", err
	}
	tmp := jar + ".tmp" + strconv.Itoa(os.Getpid())
	b, err := os.ReadFile(filepath.Join(dir, "target", "springapp.jar"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", err
	}
	return jar, os.Rename(tmp, jar)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// App is a running service.
type App struct {
	*jvmapp.Process
	PID  int
	Port int
	// LogDir holds logback's file (springapp.log).
	LogDir string
}

// Config says how to start the service.
type Config struct {
	Java, Jar string
	JVMArgs   []string
	// Dir holds the port file and the log; the caller removes it.
	Dir string
	// Output receives the JVM's stdout and stderr (nil: discarded).
	Output *os.File
}

// Start launches the service on a free loopback port and waits until it
// answers.
func Start(ctx context.Context, c Config) (*App, error) {
	portFile := filepath.Join(c.Dir, "port")
	os.Remove(portFile)
	argv := append([]string{}, c.JVMArgs...)
	argv = append(argv, "-Dperfscope.portfile="+portFile, "-Dperfscope.logdir="+c.Dir, "-jar", c.Jar)
	cmd := exec.Command(c.Java, argv...)
	cmd.Stdout, cmd.Stderr = c.Output, c.Output
	proc, err := jvmapp.StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	a := &App{Process: proc, PID: cmd.Process.Pid, LogDir: c.Dir}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil {
			if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
				a.Port = p
				if a.Healthy() {
					return a, nil
				}
			}
		}
		select {
		case <-a.Exited():
			return nil, fmt.Errorf("the Spring Boot service exited during start-up: %v", cmd.ProcessState)
		case <-ctx.Done():
			a.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Stop()
			return nil, errors.New("the Spring Boot service did not start within 90s")
		}
	}
}

// URL is an endpoint of the service.
func (a *App) URL(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", a.Port, path) }

// Healthy says whether the service answers.
func (a *App) Healthy() bool {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(a.URL("/actuator/health"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Truth is the in-app ThreadMXBean measurement at one moment.
type Truth struct {
	Requests int64 `json:"requests"`
	// RequestThreadBytes is what request threads allocated while the
	// filter chain ran; JVMThreadBytes is every live thread's total.
	RequestThreadBytes int64 `json:"request_thread_bytes"`
	JVMThreadBytes     int64 `json:"jvm_thread_bytes"`
	ByURI              map[string]struct {
		Requests int64 `json:"requests"`
		Bytes    int64 `json:"bytes"`
	} `json:"by_uri"`
}

// Truth reads GET /truth.
func (a *App) Truth() (Truth, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(a.URL("/truth"))
	if err != nil {
		return Truth{}, err
	}
	defer resp.Body.Close()
	var t Truth
	return t, json.NewDecoder(resp.Body).Decode(&t)
}

// PerRequest is the truth between two readings: request-thread and
// whole-JVM bytes per request, and per URI template.
func PerRequest(before, after Truth) (requestThreads, jvm float64, byURI map[string]float64) {
	n := float64(after.Requests - before.Requests)
	if n <= 0 {
		return 0, 0, nil
	}
	byURI = map[string]float64{}
	for uri, x := range after.ByURI {
		y := before.ByURI[uri]
		if d := x.Requests - y.Requests; d > 0 {
			byURI[uri] = float64(x.Bytes-y.Bytes) / float64(d)
		}
	}
	return float64(after.RequestThreadBytes-before.RequestThreadBytes) / n, float64(after.JVMThreadBytes-before.JVMThreadBytes) / n, byURI
}
