// Package jvmapp builds and runs perfscope's sample JVM service
// (SampleApp.java, plain JDK): endpoints whose allocation per request is
// known, used by `perfscope lab jvm`, the integration tests and the
// overhead benchmark. The source is embedded so the lab works from the
// binary alone; it is compiled with the local JDK's javac at run time.
package jvmapp

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed SampleApp.java
var source []byte

// JDK is a java/javac pair.
type JDK struct {
	Java, Javac string
}

// FindJDK uses $JAVA_HOME, else java and javac on PATH.
func FindJDK() (JDK, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		j := JDK{Java: filepath.Join(home, "bin", "java"), Javac: filepath.Join(home, "bin", "javac")}
		if _, err := os.Stat(j.Javac); err == nil {
			return j, nil
		}
	}
	java, err1 := exec.LookPath("java")
	javac, err2 := exec.LookPath("javac")
	if err := errors.Join(err1, err2); err != nil {
		return JDK{}, fmt.Errorf("no JDK found (set JAVA_HOME or put java and javac on PATH): %w", err)
	}
	return JDK{Java: java, Javac: javac}, nil
}

// Build compiles the sample app into dir.
func (j JDK) Build(ctx context.Context, dir string) error {
	src := filepath.Join(dir, "SampleApp.java")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, j.Javac, "-d", dir, src).CombinedOutput()
	if err != nil {
		return fmt.Errorf("javac SampleApp.java: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// The JVM may run as another user (tests drop privileges).
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, 0o755)
		}
		return err
	})
}

// App is a running sample app.
type App struct {
	Cmd *exec.Cmd
	// PID is the JVM's pid as seen from here.
	PID  int
	Port int
	done chan struct{}
}

// Config says how to start the app.
type Config struct {
	Java     string
	ClassDir string
	// JVMArgs go before the class name (-Xmx, -XX flags).
	JVMArgs []string
	// Wrap runs the JVM under a launcher ending in a shell script, e.g.
	// unshare ... sh -c "mount ... && exec"; the shell-quoted JVM command
	// line is appended to the script, and the JVM is found as the
	// launcher's only child.
	Wrap []string
	Log  *os.File
}

// Start launches the app on a free loopback port and waits until it
// serves /health.
func Start(ctx context.Context, c Config) (*App, error) {
	portFile := filepath.Join(c.ClassDir, fmt.Sprintf("port-%d-%d", os.Getpid(), time.Now().UnixNano()))
	argv := append([]string{c.Java}, c.JVMArgs...)
	argv = append(argv, "-cp", c.ClassDir, "SampleApp", "0", portFile)
	if len(c.Wrap) > 0 {
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		wrap := append([]string{}, c.Wrap...)
		wrap[len(wrap)-1] += " " + strings.Join(quoted, " ")
		argv = wrap
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &App{Cmd: cmd, PID: cmd.Process.Pid, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	defer os.Remove(portFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil {
			if a.Port, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				break
			}
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("sample app exited during start-up: %v", cmd.ProcessState)
		case <-ctx.Done():
			a.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Stop()
			return nil, errors.New("sample app did not start within 60s")
		}
	}
	if len(c.Wrap) > 0 {
		pid, err := childOf(a.PID)
		if err != nil {
			a.Stop()
			return nil, err
		}
		a.PID = pid
	}
	return a, nil
}

// childOf finds the JVM under a launcher (unshare --fork runs it as its
// only child).
func childOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("launcher %d has children %q, want one JVM", pid, f)
	}
	return strconv.Atoi(f[0])
}

// URL is an endpoint of the app.
func (a *App) URL(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", a.Port, path) }

// Healthy says whether the app still answers.
func (a *App) Healthy() bool {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(a.URL("/health"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Running says whether the process has not exited.
func (a *App) Running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// Stop terminates the app (its whole process group) and waits.
func (a *App) Stop() {
	pgid := a.Cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-a.done
	}
}
