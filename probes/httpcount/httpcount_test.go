package httpcount

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
)

func TestFoldDigits(t *testing.T) {
	for in, want := range map[string]string{"/orders/####": "/orders/#", "/a/#/b/##x#": "/a/#/b/#x#", "/plain": "/plain"} {
		if got := foldDigits(in); got != want {
			t.Errorf("foldDigits(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSubAndFinal(t *testing.T) {
	prev := Snapshot{Responses: map[Response]uint64{{80, 200}: 5}, Requests: map[Request]uint64{{Port: 80, Method: "GET", Path: "/a"}: 5}, Lost: Lost{Reads: 1}}
	cur := Snapshot{Responses: map[Response]uint64{{80, 200}: 9, {80, 100}: 2, {80, 404}: 1}, Requests: map[Request]uint64{{Port: 80, Method: "GET", Path: "/a"}: 9}, Lost: Lost{Reads: 3}}
	d := cur.Sub(prev)
	if d.Responses[Response{80, 200}] != 4 || d.Responses[Response{80, 100}] != 2 || d.Lost.Reads != 2 {
		t.Errorf("delta %+v", d)
	}
	if d.Final() != 5 {
		t.Errorf("final responses %d, want 5 (1xx are interim)", d.Final())
	}
}

// The probe counts the responses and request lines of a real HTTP/1.1
// server (Go's net/http, in this very process, so the tgid is ours) on
// its listening port only: the same process's client connections and a
// second, uncounted listener are left out.
func TestProbeCountsServedRequests(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/orders/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusCreated)
		}
		fmt.Fprintln(w, `{"id":17}`)
	})
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "pong") })
	// A three-digit status past RFC 9110's 100-599 (Go writes any up to
	// 999) is counted as one that did not parse: status 0.
	mux.HandleFunc("/odd", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(799) })
	counted := serve(t, mux)
	uncounted := serve(t, mux)

	// Both ways of counting, each with every attach method: the socket
	// tracepoints (the default) and the syscalls (kernels before 6.3).
	for _, path := range []Path{PathSocket, PathSyscall} {
		for _, m := range probes.Methods {
			t.Run(string(path)+"/"+string(m), func(t *testing.T) {
				countServed(t, Options{Method: m, Path: path, TGID: os.Getpid(), Ports: []uint16{counted.port}}, counted, uncounted)
			})
		}
	}
	t.Run("auto", func(t *testing.T) {
		p, err := Open(Options{TGID: os.Getpid(), Ports: []uint16{counted.port}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if p.Path != PathSocket {
			t.Errorf("path %q on Linux 6.3 or later, want %q", p.Path, PathSocket)
		}
	})
}

// countServed opens the probe with opts, serves known requests and checks
// what it counted, then that closing it leaves nothing behind.
func countServed(t *testing.T, opts Options, counted, uncounted *server) {
	{
		{
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			p, err := Open(opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if p.Path != opts.Path {
				t.Errorf("path %q, want %q", p.Path, opts.Path)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			get := func(s *server, path string, n int) {
				for i := 0; i < n; i++ {
					resp, err := s.client.Get(s.url + path)
					if err != nil {
						t.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			get(counted, "/orders/17", 120)
			get(counted, "/orders/4242?expand=items", 80)
			get(counted, "/missing", 30)
			get(counted, "/odd", 10)
			get(uncounted, "/ping", 50)
			for i := 0; i < 20; i++ {
				resp, err := counted.client.Post(counted.url+"/orders/", "application/json", strings.NewReader(`{"sku":"A-1","qty":2}`))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			t.Logf("responses %v requests %v lost %+v", d.Responses, d.Requests, d.Lost)
			want := map[Response]uint64{{counted.port, 200}: 200, {counted.port, 404}: 30, {counted.port, 201}: 20, {counted.port, 0}: 10}
			for k, n := range want {
				if d.Responses[k] != n {
					t.Errorf("responses %+v: %d, want %d", k, d.Responses[k], n)
				}
			}
			if len(d.Responses) != len(want) || d.Final() != 260 {
				t.Errorf("responses %v (final %d), want %v", d.Responses, d.Final(), want)
			}
			// Request lines split the count by endpoint, every one of
			// them: Go's server reads one byte ahead while a handler runs
			// (to notice a client closing), so on a kept-alive connection
			// the next request's first byte often arrives in a read of its
			// own — how often depends on scheduling (a busy machine splits
			// more) — and the probe carries it to the socket's next read.
			wantReq := map[Request]uint64{
				{Port: counted.port, Method: "GET", Path: "/orders/#"}: 200,
				{Port: counted.port, Method: "GET", Path: "/missing"}:  30,
				{Port: counted.port, Method: "POST", Path: "/orders/"}: 20,
				{Port: counted.port, Method: "GET", Path: "/odd"}:      10,
			}
			for k, n := range wantReq {
				if got := d.Requests[k]; got != n {
					t.Errorf("requests %+v: %d, want %d", k, got, n)
				}
			}
			if len(d.Requests) != len(wantReq) {
				t.Errorf("requests %v, want %v", d.Requests, wantReq)
			}
			if d.Lost != (Lost{}) {
				t.Errorf("lost %+v", d.Lost)
			}
			for _, c := range p.Costs() {
				t.Logf("%s: %d runs", c.Program, c.RunCount)
			}
			if err := p.Close(); err != nil {
				t.Error(err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		}
	}
}

type server struct {
	port   uint16
	url    string
	client *http.Client
}

func serve(t *testing.T, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	tr := &http.Transport{MaxIdleConnsPerHost: 2}
	t.Cleanup(func() { tr.CloseIdleConnections(); srv.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	return &server{port: port, url: fmt.Sprintf("http://127.0.0.1:%d", port), client: &http.Client{Transport: tr}}
}

func TestOpenRefusesWithoutPorts(t *testing.T) {
	if _, err := Open(Options{TGID: os.Getpid()}); err == nil || !strings.Contains(err.Error(), "no TCP port") {
		t.Errorf("err %v", err)
	}
	if _, err := Open(Options{TGID: 0, Ports: []uint16{80}}); err == nil {
		t.Error("no error without a process")
	}
}

// Each path's load creates only the state maps its programs use: the
// socket path on tp_btf the socket storage, the others the hashes keyed by
// the socket's address (and the syscall path its in-flight calls).
func TestLoadKeepsOnlyItsStateMaps(t *testing.T) {
	for _, tc := range []struct {
		path   Path
		prefix string // of the attach method's programs
		keep   []string
		drop   []string
	}{
		{PathSocket, "btf_", []string{"sock_states"}, []string{"h2conns", "carries", "inflight"}},
		{PathSocket, "raw_", []string{"h2conns", "carries"}, []string{"sock_states", "inflight"}},
		{PathSyscall, "btf_", []string{"h2conns", "carries", "inflight"}, []string{"sock_states"}},
	} {
		spec, err := loadHttpcount()
		if err != nil {
			t.Fatal(err)
		}
		hooks := sockHooks
		if tc.path == PathSyscall {
			hooks = syscallHooks
		}
		keep := map[string]bool{}
		for _, h := range hooks {
			keep[tc.prefix+h.Name] = true
		}
		for name := range spec.Programs {
			if !keep[name] {
				delete(spec.Programs, name)
			}
		}
		dropUnused(spec, "sock_states", "h2conns", "carries", "inflight")
		for _, name := range tc.keep {
			if spec.Maps[name] == nil {
				t.Errorf("%s/%s: %s dropped", tc.path, tc.prefix, name)
			}
		}
		for _, name := range tc.drop {
			if spec.Maps[name] != nil {
				t.Errorf("%s/%s: %s kept", tc.path, tc.prefix, name)
			}
		}
	}
}
