package httpcount_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/httpcount"
)

// h2Server is Go's net/http serving HTTP/1.1 and HTTP/2 without TLS (h2c
// with prior knowledge, as gRPC clients speak it) on one port, in this
// process (so the probe's tgid is ours).
type h2Server struct {
	port       uint16
	url        string
	h1, h2     *http.Client
	bigPayload string
}

func startH2Server(t *testing.T) *h2Server {
	t.Helper()
	s := &h2Server{bigPayload: strings.Repeat("0123456789abcdef", 100_000/16)}
	mux := http.NewServeMux()
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	// Larger than a frame (16 KiB) and the server's write buffer: DATA
	// frames that span writes.
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, s.bigPayload) })
	// No body: END_STREAM on the HEADERS frame.
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// Trailers, as gRPC ends every response: END_STREAM on the trailing
	// HEADERS frame.
	mux.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		io.WriteString(w, "\x00\x00\x00\x00\x05hello")
		w.(http.Flusher).Flush()
		w.Header().Set("Grpc-Status", "0")
	})
	mux.HandleFunc("/post", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d\n", n)
	})
	// A handler that aborts: the server resets the stream (RST_STREAM)
	// without a response, which is not counted.
	mux.HandleFunc("/abort", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &protos, ErrorLog: nil}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.port = uint16(ln.Addr().(*net.TCPAddr).Port)
	s.url = "http://" + ln.Addr().String()
	var h2only http.Protocols
	h2only.SetUnencryptedHTTP2(true)
	h2t := &http.Transport{Protocols: &h2only}
	h1t := &http.Transport{}
	t.Cleanup(func() { h2t.CloseIdleConnections(); h1t.CloseIdleConnections() })
	s.h1 = &http.Client{Transport: h1t, Timeout: 30 * time.Second}
	s.h2 = &http.Client{Transport: h2t, Timeout: 30 * time.Second}
	return s
}

// load sends n requests to each path over HTTP/2 from 8 goroutines (one
// connection, streams multiplexed), and h1 plain HTTP/1.1 requests; it
// returns the HTTP/2 responses received in full.
func (s *h2Server) load(t *testing.T, n, h1 int) int {
	t.Helper()
	paths := []string{"/small", "/big", "/empty", "/trailer", "/post"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done int
	var failed []error
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				path := paths[i%len(paths)]
				var resp *http.Response
				var err error
				if path == "/post" {
					resp, err = s.h2.Post(s.url+path, "application/octet-stream", strings.NewReader(s.bigPayload[:20_000]))
				} else {
					resp, err = s.h2.Get(s.url + path)
				}
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.ProtoMajor != 2 {
						err = fmt.Errorf("%s answered over %s", path, resp.Proto)
					}
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					done++
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d HTTP/2 requests failed: %v", len(failed), errors.Join(failed[:1]...))
	}
	for i := 0; i < 3; i++ {
		if resp, err := s.h2.Get(s.url + "/abort"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	for i := 0; i < h1; i++ {
		resp, err := s.h1.Get(s.url + "/small")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 1 {
			t.Fatalf("HTTP/1 client answered over %s", resp.Proto)
		}
	}
	return done
}

// The probe counts every HTTP/2 response a real server (Go's net/http
// over h2c) ended — small, multi-frame bodies spanning writes, bodiless
// responses and responses ending with trailers, on streams multiplexed
// over one connection — and the HTTP/1.1 responses on the same port, not
// the streams the server reset; on both paths with every attach method.
func TestProbeCountsHTTP2Responses(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	s := startH2Server(t)
	type variant struct {
		name string
		opts httpcount.Options
	}
	var variants []variant
	for _, path := range []httpcount.Path{httpcount.PathSocket, httpcount.PathSyscall} {
		for _, m := range probes.Methods {
			variants = append(variants, variant{string(path) + "/" + string(m), httpcount.Options{Method: m, Path: path}})
		}
	}
	variants = append(variants, variant{"responses-only", httpcount.Options{ResponsesOnly: true}})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			// New connections each time, so that the probe sees the
			// server's first SETTINGS frame.
			s.h2.Transport.(*http.Transport).CloseIdleConnections()
			opts := v.opts
			opts.TGID, opts.Ports = os.Getpid(), []uint16{s.port}
			p, err := httpcount.Open(opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer p.Close()
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			got := s.load(t, 400, 30)
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			t.Logf("h2 %v h1 %v lost %+v", d.H2Responses, d.Responses, d.Lost)
			if d.H2Responses[s.port] != uint64(got) {
				t.Errorf("HTTP/2 responses %d, want %d", d.H2Responses[s.port], got)
			}
			if d.Responses[httpcount.Response{Port: s.port, Status: 200}] != 30 {
				t.Errorf("HTTP/1 responses %v, want 30 of 200", d.Responses)
			}
			if d.Final() != uint64(got)+30 {
				t.Errorf("final %d, want %d", d.Final(), got+30)
			}
			if d.Lost != (httpcount.Lost{}) {
				t.Errorf("lost %+v", d.Lost)
			}
			if err := p.Close(); err != nil {
				t.Error(err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

// A connection open before the probe attached is picked up at the first
// write that starts with a response's HEADERS frame: its later responses
// are counted, none twice.
func TestProbeCountsHTTP2ConnectionOpenBefore(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	s := startH2Server(t)
	s.load(t, 16, 0) // the connection is open and idle now
	for _, opts := range []httpcount.Options{{Path: httpcount.PathSocket}, {Path: httpcount.PathSyscall}} {
		opts.TGID, opts.Ports = os.Getpid(), []uint16{s.port}
		p, err := httpcount.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := p.Snapshot()
		var n int
		for i := 0; i < 200; i++ {
			resp, err := s.h2.Get(s.url + "/small")
			if err != nil {
				p.Close()
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			n++
		}
		last, _ := p.Snapshot()
		p.Close()
		d := last.Sub(first)
		if d.H2Responses[s.port] != uint64(n) || d.Lost != (httpcount.Lost{}) {
			t.Errorf("%s path: HTTP/2 responses %d (lost %+v), want %d", opts.Path, d.H2Responses[s.port], d.Lost, n)
		}
	}
}

// h2Frame is one HTTP/2 frame: a 9-byte header and its payload.
func h2Frame(typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	f := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	return append(f, payload...)
}

// A vectored write shows the probe only its first buffer: frames in the
// later ones are not walked, the write is counted as not parsed (never a
// silent zero), and the connection is picked up again at the next write
// that starts with a response.
func TestProbeCountsHTTP2VectoredWrites(t *testing.T) {
	ln, port := rootListener(t)
	settings := h2Frame(4, 0, 0, nil)
	// HEADERS, END_STREAM|END_HEADERS, ":status: 200" (HPACK static index
	// 8): a whole response in one frame.
	response := func(stream uint32) []byte { return h2Frame(1, 0x5, stream, []byte{0x88}) }
	for _, path := range []httpcount.Path{httpcount.PathSocket, httpcount.PathSyscall} {
		t.Run(string(path), func(t *testing.T) {
			d := countDuring(t, httpcount.Options{Path: path}, port, func() {
				server := connect(t, ln)
				write := func(bufs ...[]byte) {
					b := net.Buffers(bufs)
					if _, err := b.WriteTo(server); err != nil {
						t.Fatal(err)
					}
				}
				write(settings)
				write(append(response(1), response(3)...)) // one buffer: both counted
				write(response(5), response(7))            // writev: 5 seen, 7 not
				write(response(9))                         // picked up again
			})
			if d.H2Responses[port] != 4 {
				t.Errorf("HTTP/2 responses %d, want 4 (streams 1, 3, 5 and 9; 7 was past the first buffer)", d.H2Responses[port])
			}
			if d.Lost != (httpcount.Lost{H2Unparsed: 1}) {
				t.Errorf("lost %+v, want the one vectored write not parsed", d.Lost)
			}
		})
	}
}

// A connection opened before the probe and first seen mid-stream (a DATA
// frame) is of unknown protocol: its write is counted as unrecognized,
// never silently dropped, and the connection is counted from the next
// write that starts a response.
func TestProbeSaysWhatItDidNotRecognize(t *testing.T) {
	ln, port := rootListener(t)
	server := connect(t, ln)
	if _, err := server.Write(h2Frame(4, 0, 0, nil)); err != nil { // before the probe
		t.Fatal(err)
	}
	d := countDuring(t, httpcount.Options{}, port, func() {
		for _, f := range [][]byte{
			h2Frame(0, 0x1, 1, []byte("the end of a body")), // DATA, END_STREAM: not recognizable alone
			h2Frame(1, 0x5, 3, []byte{0x88}),                // a response's HEADERS: recognized, counted
			h2Frame(0, 0x1, 5, []byte("x")),                 // now followed: counted
		} {
			if _, err := server.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	})
	if d.H2Responses[port] != 2 || d.Lost != (httpcount.Lost{Unrecognized: 1}) {
		t.Errorf("HTTP/2 responses %d, lost %+v; want 2 and one unrecognized write", d.H2Responses[port], d.Lost)
	}
}

// connect opens a connection to ln whose client side reads and discards
// what the server writes, and returns the server side; both close with
// the test.
func connect(t testing.TB, ln net.Listener) net.Conn {
	t.Helper()
	client, server := pair(t, ln)
	go io.Copy(io.Discard, client)
	return server
}

// pair opens a connection to ln and returns its client and server sides,
// which close with the test.
func pair(t testing.TB, ln net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// countDuring opens the probe on this process's port with opts, runs
// serve, and returns what the probe counted meanwhile.
func countDuring(t *testing.T, opts httpcount.Options, port uint16, serve func()) httpcount.Snapshot {
	t.Helper()
	opts.TGID, opts.Ports = os.Getpid(), []uint16{port}
	p, err := httpcount.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	serve()
	last, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := last.Sub(first)
	t.Logf("h2 %v h1 %v lost %+v", d.H2Responses, d.Responses, d.Lost)
	return d
}

// rootListener gates a root test, takes the BPF lock and listens on a
// loopback port for it.
func rootListener(t testing.TB) (net.Listener, uint16) {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}
