package jvmapp

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed UDPSink.java
var udpSinkSource []byte

// UDPSink is a running sample UDP receiver (UDPSink.java): a JVM reading
// a loopback port through a small receive buffer, which a "gc" datagram
// stops for a full collection of a large live set.
type UDPSink struct {
	Cmd  *exec.Cmd
	PID  int
	Port int
	done chan struct{}
}

// UDPSinkConfig says how to start the receiver.
type UDPSinkConfig struct {
	// ClassDir is where it is compiled and run from.
	ClassDir string
	// RcvBuf is the SO_RCVBUF it asks for (the kernel doubles it).
	RcvBuf int
	// LiveObjects sizes the live set a collection traces (~24 B each).
	LiveObjects int
	// JVMArgs go before the class name.
	JVMArgs []string
	Log     *os.File
}

// StartUDPSink compiles and starts the receiver, and waits until its
// socket is bound.
func (j JDK) StartUDPSink(ctx context.Context, c UDPSinkConfig) (*UDPSink, error) {
	src := filepath.Join(c.ClassDir, "UDPSink.java")
	if err := os.WriteFile(src, udpSinkSource, 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, j.Javac, "-d", c.ClassDir, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("javac UDPSink.java: %v: %s", err, strings.TrimSpace(string(out)))
	}
	portFile := filepath.Join(c.ClassDir, fmt.Sprintf("udpsink-port-%d-%d", os.Getpid(), time.Now().UnixNano()))
	defer os.Remove(portFile)
	argv := append([]string{}, c.JVMArgs...)
	argv = append(argv, "-cp", c.ClassDir, "UDPSink", strconv.Itoa(c.RcvBuf), strconv.Itoa(c.LiveObjects), portFile)
	cmd := exec.Command(j.Java, argv...)
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &UDPSink{Cmd: cmd, PID: cmd.Process.Pid, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(portFile); err == nil {
			if s.Port, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("UDPSink exited during start-up: %v", cmd.ProcessState)
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("UDPSink did not start within 60s")
		}
	}
}

// Stop terminates the receiver and waits.
func (s *UDPSink) Stop() {
	pgid := s.Cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
}
