package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/measure"
)

func TestFDBudget(t *testing.T) {
	for _, c := range []struct {
		limit uint64
		open  int
		max   int
		ok    bool
	}{
		{20000, 80, DefaultMaxConnections, true},
		// 300 - 80 open - (80 + 64) reserved
		{300, 80, 76, true},
		{230, 80, 6, false},
		{100, 80, 0, false},
		{1 << 63, 80, DefaultMaxConnections, true}, // unlimited
	} {
		b := newFDBudget(c.limit, c.open)
		if b.MaxConnections != c.max || (b.check() == nil) != c.ok {
			t.Errorf("limit %d, %d open: %d connections (check %v), want %d (ok %v)", c.limit, c.open, b.MaxConnections, b.check(), c.max, c.ok)
		}
	}
	err := newFDBudget(100, 80).check()
	if err == nil || !strings.Contains(err.Error(), "ulimit -n 232") {
		t.Errorf("a limit too low: %v; want it to say the limit to set", err)
	}
}

// pipeConn is one end of a net.Pipe; the other end is closed with it.
func pipeConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

func isClosed(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !strings.Contains(err.Error(), "deadline")
}

// At the limit the connection waiting longest for a request goes first,
// then the one active longest; one being served never does,
// and when every held connection is being served the newcomer is refused.
func TestConnTableEvictsOldestWaitingFirst(t *testing.T) {
	table := newConnTable(3)
	admit := func() *trackedConn {
		c := table.admit(pipeConn(t))
		if c == nil {
			t.Fatal("refused while a connection could be evicted")
		}
		return c.(*trackedConn)
	}
	a, b, c := admit(), admit(), admit()
	table.connState(a, http.StateActive) // a read a request
	table.move(b, serving)               // b is served
	d := admit()                         // evicts c: the only one waiting
	if !c.closed || a.closed || b.closed || d.closed {
		t.Fatalf("after d: closed a %v b %v c %v d %v, want only c", a.closed, b.closed, c.closed, d.closed)
	}
	if !isClosed(c.Conn) {
		t.Error("the evicted connection's descriptor is still open")
	}
	table.connState(d, http.StateActive)
	e := admit() // nothing waiting: evicts a, active longest
	if !a.closed || d.closed || e.closed {
		t.Fatalf("after e: closed a %v d %v e %v, want a", a.closed, d.closed, e.closed)
	}
	table.connState(d, http.StateIdle) // d's request answered: waiting again
	table.connState(e, http.StateActive)
	f := admit() // evicts d (waiting), not e (active)
	if !d.closed || e.closed {
		t.Fatalf("after f: closed d %v e %v, want d", d.closed, e.closed)
	}
	table.move(e, serving)
	table.move(f, serving)
	raw := pipeConn(t)
	if table.admit(raw) != nil {
		t.Fatal("admitted a fourth connection while three were served")
	}
	if !isClosed(raw) {
		t.Error("the refused connection was left open")
	}
	open, evicted, refused := table.stats()
	if open != 3 || evicted != 3 || refused != 1 {
		t.Errorf("stats: %d open, %d evicted, %d refused; want 3, 3, 1", open, evicted, refused)
	}
	b.Close()
	b.Close() // a second close changes nothing
	if open, _, _ := table.stats(); open != 2 {
		t.Errorf("%d open after closing one of 3", open)
	}
}

// A server behind the table, on loopback, with room for 4 connections:
// 50 idle connections and then 50 slowloris ones (a header's first bytes,
// never its end) do not keep a scrape out, and a scrape being answered is
// never the one closed.
func TestLimitedServerUnderIdleAndSlowFloods(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	table := newConnTable(4)
	release := make(chan struct{})
	inSlow := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fast", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		inSlow <- struct{}{}
		<-release
		io.WriteString(w, "slow ok")
	})
	hs := &http.Server{Handler: table.protect(mux), ReadHeaderTimeout: time.Minute,
		ConnState: table.connState, ConnContext: connContext, ErrorLog: log.New(io.Discard, "", 0)}
	go hs.Serve(&limitedListener{Listener: ln, table: table})
	defer hs.Close()
	addr := ln.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (string, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	// A scrape in its handler while the floods arrive.
	slow := make(chan string, 1)
	go func() {
		body, err := get("/slow")
		if err != nil {
			body = err.Error()
		}
		slow <- body
	}()
	<-inSlow
	for _, flood := range []struct {
		name  string
		first string
	}{{"idle", ""}, {"slowloris", "GET /fast HTTP/1.1\r\nHost: x\r\n"}} {
		var held []net.Conn
		for range 50 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if flood.first != "" {
				io.WriteString(c, flood.first)
			}
			held = append(held, c)
		}
		if body, err := get("/fast"); err != nil || body != "ok" {
			t.Fatalf("a scrape after %d %s connections: %q %v", len(held), flood.name, body, err)
		}
		// All but the last few were closed by the server (a reset when
		// it closed with the flood's bytes unread).
		closed := 0
		for _, c := range held {
			c.SetReadDeadline(time.Now().Add(time.Second))
			var ne net.Error
			if _, err := bufio.NewReader(c).ReadByte(); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closed++
			}
		}
		if closed < len(held)-4 {
			t.Errorf("%s flood: the server closed %d of %d connections, want all but the last 3", flood.name, closed, len(held))
		}
	}
	close(release)
	if body := <-slow; body != "slow ok" {
		t.Errorf("the scrape being answered during the floods: %q", body)
	}
	if open, _, _ := table.stats(); open > 4 {
		t.Errorf("%d connections open, limit 4", open)
	}
}

// Every endpoint answers GET and HEAD; other methods get 405 and an
// Allow header, not an exposition.
func TestMethods(t *testing.T) {
	srv := testServer(t)
	h := srv.Handler()
	for _, path := range []string{"/metrics", "/report", "/healthz", "/readyz", "/"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "TRACE", "BREW"} {
			rec := serveRequest(h, method, path)
			if rec.code != http.StatusMethodNotAllowed || rec.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, \"GET, HEAD\"", method, path, rec.code, rec.header.Get("Allow"))
			}
			if strings.Contains(rec.body, "perfscope_") {
				t.Errorf("%s %s answered with metrics", method, path)
			}
		}
	}
	if rec := serveRequest(h, http.MethodGet, "/metrics"); rec.code != 200 || !strings.Contains(rec.body, "perfscope_recipe_info") {
		t.Errorf("GET /metrics: %d %.200q", rec.code, rec.body)
	}
	if rec := serveRequest(h, http.MethodHead, "/metrics"); rec.code != 200 || rec.body != "" {
		t.Errorf("HEAD /metrics: %d, %d bytes of body", rec.code, len(rec.body))
	}
	if rec := serveRequest(h, http.MethodGet, "/nope"); rec.code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", rec.code)
	}
}

type recorded struct {
	code   int
	header http.Header
	body   string
}

// serveRequest sends one request through a real server on loopback (a
// HEAD's body is dropped by the server, not by the handler).
func serveRequest(h http.Handler, method, path string) recorded {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return recorded{code: -1, body: err.Error()}
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	defer hs.Shutdown(context.Background())
	req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return recorded{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return recorded{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// The listening line names the recipe, the window, the metrics' URL with
// its scheme, the connections held at once, and basic auth when asked.
func TestListening(t *testing.T) {
	r, err := LoadRecipe(measure.Live(), "softirq-balance", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{recipe: r, opts: Options{Interval: 15 * time.Second}, budget: FDBudget{MaxConnections: 256}}
	want := "perfscope serve: recipe softirq-balance, a window every 15s, metrics at http://127.0.0.1:9742/metrics (at most 256 connections at once)"
	if got := s.Listening("127.0.0.1:9742"); got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}
	s.opts.Web = &WebConfig{TLS: true, BasicAuth: true}
	want = "perfscope serve: recipe softirq-balance, a window every 15s, metrics at https://[::]:9742/metrics (at most 256 connections at once, basic auth)"
	if got := s.Listening("[::]:9742"); got != want {
		t.Errorf("TLS and basic auth: %q, want %q", got, want)
	}
}
