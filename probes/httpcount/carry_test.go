package httpcount_test

import (
	"io"
	"net"
	"testing"

	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/httpcount"
)

// A request line whose first byte arrives in a read of its own (Go's
// server reads one byte ahead on a kept-alive connection) is counted once,
// whole, from the byte the probe carried to the socket's next read; a
// connection the peer closes after such a byte leaves nothing for the
// next connection. On both paths with every attach method: the carry is
// the socket's own storage on tp_btf and a hash keyed by its address
// elsewhere.
func TestProbeCarriesARequestLineSplitAcrossReads(t *testing.T) {
	ln, port := rootListener(t)
	for _, path := range []httpcount.Path{httpcount.PathSocket, httpcount.PathSyscall} {
		for _, m := range probes.Methods {
			t.Run(string(path)+"/"+string(m), func(t *testing.T) {
				d := countDuring(t, httpcount.Options{Method: m, Path: path}, port, func() {
					for range 3 {
						client, server := pair(t, ln)
						splitRead(t, client, server, "G", "ET /orders/17 HTTP/1.1\r\nHost: lab\r\n\r\n")
						splitRead(t, client, server, "P", "OST /orders/ HTTP/1.1\r\nHost: lab\r\n\r\n")
						// A last byte, then the peer closes: the carry goes.
						splitRead(t, client, server, "D", "")
						client.Close()
						if n, err := server.Read(make([]byte, 1)); n != 0 || err != io.EOF {
							t.Fatalf("read after close: %d, %v", n, err)
						}
						server.Close()
					}
				})
				want := map[httpcount.Request]uint64{
					{Port: port, Method: "GET", Path: "/orders/#"}: 3,
					{Port: port, Method: "POST", Path: "/orders/"}: 3,
				}
				if len(d.Requests) != len(want) {
					t.Errorf("requests %v, want %v", d.Requests, want)
				}
				for k, n := range want {
					if d.Requests[k] != n {
						t.Errorf("requests %+v: %d, want %d", k, d.Requests[k], n)
					}
				}
			})
		}
	}
}

// splitRead has the client write first and then rest, and the server read
// each in a read of its own.
func splitRead(t *testing.T, client, server net.Conn, first, rest string) {
	t.Helper()
	for _, s := range []string{first, rest} {
		if s == "" {
			continue
		}
		if _, err := client.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(server, make([]byte, len(s))); err != nil {
			t.Fatal(err)
		}
	}
}
