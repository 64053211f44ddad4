package goapp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
)

// Server is a running lab service.
type Server struct {
	// Addr is where it listens ("127.0.0.1:PORT").
	Addr string
	PID  int
	cmd  *exec.Cmd
	done chan error
}

// Config is how the service allocates per request.
type Config struct {
	// Mode: "plain", "pooled" or "leaky".
	Mode string
	// Count buffers of Size bytes per request.
	Count, Size int
	// MemProfileRate set at start (0: the runtime's).
	MemProfileRate int
	// Env is added to the service's environment (GOGC=...).
	Env []string
	// Pprof serves net/http/pprof's handlers under /debug/pprof/.
	Pprof bool
	// H2C also serves HTTP/2 without TLS (a service built with Go 1.24
	// or later).
	H2C bool
}

// Start runs the service at path on a loopback port and waits until it
// listens. Stop ends it.
func Start(ctx context.Context, path string, c Config) (*Server, error) {
	if c.Mode == "" {
		c.Mode = "plain"
	}
	args := []string{"-mode", c.Mode, "-count", strconv.Itoa(c.Count), "-size", strconv.Itoa(c.Size)}
	if c.MemProfileRate > 0 {
		args = append(args, "-memprofilerate", strconv.Itoa(c.MemProfileRate))
	}
	if c.Pprof {
		args = append(args, "-pprof")
	}
	if c.H2C {
		args = append(args, "-h2c")
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(cleanEnv(), c.Env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{PID: cmd.Process.Pid, cmd: cmd, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	go func() { s.done <- cmd.Wait() }()
	select {
	case line, ok := <-lines:
		addr, found := strings.CutPrefix(line, "listening on ")
		if !ok || !found {
			s.Stop()
			return nil, fmt.Errorf("the Go lab service did not start: %q", line)
		}
		s.Addr = addr
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, errors.New("the Go lab service did not listen within 30s")
	case <-ctx.Done():
		s.Stop()
		return nil, ctx.Err()
	}
	return s, nil
}

// URL is the service's URL for path.
func (s *Server) URL(path string) string { return "http://" + s.Addr + path }

// Truth is what the service's runtime reports about itself since start
// (runtime/metrics), and the requests /work served. The service flushes
// its Ps' allocation caches before it reads the counts, so they are exact
// at the moment of reading: see UnflushedObjects.
type Truth struct {
	Requests   int64  `json:"requests"`
	AllocBytes uint64 `json:"alloc_bytes"`
	// AllocObjects is /gc/heap/allocs:objects: every heap object the
	// runtime allocated, a tiny allocator's 16-byte block counted once
	// however many tiny allocations share it. Each is one call of
	// runtime.mProf_Malloc at MemProfileRate 1.
	AllocObjects uint64 `json:"alloc_objects"`
	// UnflushedObjects is how far /gc/heap/allocs:objects lagged behind
	// AllocObjects before the flush. The runtime counts a small object
	// only when its span leaves a P's cache (the span is full, a GC cycle
	// ends, or ReadMemStats stops the world): without the flush, a
	// difference of two readings would be off by the difference of their
	// lags, a few thousand objects on a service that allocates a little
	// of many sizes. Sub leaves it zero.
	UnflushedObjects uint64 `json:"unflushed_objects"`
	// TinyAllocs is /gc/heap/tiny/allocs:objects: the allocations (noscan,
	// under 16 bytes) that fit into the current tiny block. The runtime
	// returns them before its profiling check, so mProf_Malloc never sees
	// them, and AllocObjects does not count them either.
	TinyAllocs     uint64 `json:"tiny_allocs"`
	GCCycles       uint64 `json:"gc_cycles"`
	GoVersion      string `json:"go_version"`
	MemProfileRate int    `json:"mem_profile_rate"`
	// PoolGets, PoolPuts and PoolNews count the service's own pool's
	// calls (modes pooled and leaky) and its New function's.
	PoolGets int64 `json:"pool_gets"`
	PoolPuts int64 `json:"pool_puts"`
	PoolNews int64 `json:"pool_news"`
	// PoolAddress is the service's own pool's address ("0x…"), which
	// names it in perfscope's report of a stripped binary.
	PoolAddress string `json:"pool_address"`
}

// Sub is what the runtime counted between prev and t.
func (t Truth) Sub(prev Truth) Truth {
	return Truth{
		Requests:     t.Requests - prev.Requests,
		AllocBytes:   t.AllocBytes - prev.AllocBytes,
		AllocObjects: t.AllocObjects - prev.AllocObjects,
		TinyAllocs:   t.TinyAllocs - prev.TinyAllocs,
		GCCycles:     t.GCCycles - prev.GCCycles,
		GoVersion:    t.GoVersion, MemProfileRate: t.MemProfileRate,
	}
}

// Work drives requests of /work, concurrency at a time, and waits for
// them.
func (s *Server) Work(ctx context.Context, requests, concurrency int) error {
	_, err := httpload.Run(ctx, httpload.Spec{URL: s.URL("/work"), Requests: requests, Concurrency: concurrency})
	return err
}

// WarmUp drives requests of /work, so that the server's connection
// buffers and pools exist, and reads /truth once, so that the handler's
// one-time allocations (runtime/metrics' and encoding/json's tables) are
// behind a test's first reading.
func (s *Server) WarmUp(ctx context.Context, requests, concurrency int) error {
	if err := s.Work(ctx, requests, concurrency); err != nil {
		return fmt.Errorf("warm the Go lab service up: %w", err)
	}
	_, err := s.Truth()
	return err
}

// Truth reads /truth.
func (s *Server) Truth() (Truth, error) {
	var t Truth
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(s.URL("/truth"))
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	return t, json.NewDecoder(resp.Body).Decode(&t)
}

// Kill ends the service with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.done <- nil
}

// Stop ends the service and waits for it. Safe to call more than once.
func (s *Server) Stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		err := <-s.done
		s.done <- err
	}
}

// Alive says whether the service still runs.
func (s *Server) Alive() bool {
	select {
	case err := <-s.done:
		s.done <- err
		return false
	default:
		return true
	}
}
