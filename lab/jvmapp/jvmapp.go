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
	if err := j.compile(ctx, dir, "SampleApp.java", source); err != nil {
		return err
	}
	// The JVM may run as another user (tests drop privileges).
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, 0o755)
		}
		return err
	})
}

// Process is a started JVM (or its launcher) in a process group of its
// own: the sample app and the Spring Boot service share it.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess starts cmd in a new process group and reaps it when it
// exits.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Running says whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop terminates the whole process group and waits.
func (p *Process) Stop() {
	pgid := p.Cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// App is a running sample app.
type App struct {
	*Process
	// PID is the JVM's pid as seen from here.
	PID  int
	Port int
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
	// User runs the JVM as another user (root only); ClassDir must then
	// be writable by it (the app writes its port there).
	User *syscall.Credential
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
	if c.User != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.User}
	}
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	a := &App{Process: proc, PID: cmd.Process.Pid}
	if a.Port, err = proc.waitPort(ctx, portFile, "sample app"); err != nil {
		return nil, err
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

// compile writes one embedded Java source into dir and compiles it there.
func (j JDK) compile(ctx context.Context, dir, name string, text []byte) error {
	src := filepath.Join(dir, name)
	if err := os.WriteFile(src, text, 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, j.Javac, "-d", dir, src).CombinedOutput(); err != nil {
		return fmt.Errorf("javac %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitPort waits (at most 60 s) for the process to write the port it
// bound into portFile, which it then removes; a process that exits first,
// or ctx ending, is an error (the process is stopped).
func (p *Process) waitPort(ctx context.Context, portFile, what string) (int, error) {
	defer os.Remove(portFile)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil {
			if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return port, nil
			}
		}
		select {
		case <-p.Exited():
			return 0, fmt.Errorf("%s exited during start-up: %v", what, p.Cmd.ProcessState)
		case <-ctx.Done():
			p.Stop()
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return 0, fmt.Errorf("%s did not start within 60s", what)
		}
	}
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
