package jvmapp

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

//go:embed UDPSink.java
var udpSinkSource []byte

// UDPSink is a running sample UDP receiver (UDPSink.java): a JVM reading
// a loopback port through a small receive buffer, which a "gc" datagram
// stops for a full collection of a large live set; with a TCP backlog it
// also accepts on a loopback TCP port (TCPPort).
type UDPSink struct {
	*Process
	PID     int
	Port    int
	TCPPort int
}

// UDPSinkConfig says how to start the receiver.
type UDPSinkConfig struct {
	// ClassDir is where it is compiled and run from.
	ClassDir string
	// RcvBuf is the SO_RCVBUF it asks for (the kernel doubles it).
	RcvBuf int
	// LiveObjects sizes the live set a collection traces (~24 B each).
	LiveObjects int
	// TCPBacklog > 0 also listens on a loopback TCP port with this listen
	// backlog, one thread accepting and closing.
	TCPBacklog int
	// JVMArgs go before the class name.
	JVMArgs []string
	Log     *os.File
}

// StartUDPSink compiles and starts the receiver, and waits until its
// socket is bound.
func (j JDK) StartUDPSink(ctx context.Context, c UDPSinkConfig) (*UDPSink, error) {
	if err := j.compile(ctx, c.ClassDir, "UDPSink.java", udpSinkSource); err != nil {
		return nil, err
	}
	portFile := filepath.Join(c.ClassDir, fmt.Sprintf("udpsink-port-%d-%d", os.Getpid(), time.Now().UnixNano()))
	argv := append([]string{}, c.JVMArgs...)
	argv = append(argv, "-cp", c.ClassDir, "UDPSink", strconv.Itoa(c.RcvBuf), strconv.Itoa(c.LiveObjects), portFile)
	tcpPortFile := portFile + "-tcp"
	if c.TCPBacklog > 0 {
		argv = append(argv, strconv.Itoa(c.TCPBacklog), tcpPortFile)
	}
	cmd := exec.Command(j.Java, argv...)
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	proc, err := StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	s := &UDPSink{Process: proc, PID: cmd.Process.Pid}
	if s.Port, err = proc.waitPort(ctx, portFile, "UDPSink"); err != nil {
		return nil, err
	}
	if c.TCPBacklog > 0 {
		if s.TCPPort, err = proc.waitPort(ctx, tcpPortFile, "UDPSink"); err != nil {
			return nil, err
		}
	}
	return s, nil
}
