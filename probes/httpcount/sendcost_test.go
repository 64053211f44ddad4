package httpcount_test

import (
	"io"
	"os"
	"testing"

	"github.com/perfscope/perfscope/probes/httpcount"
)

// The benchmarks below give what the probe's programs cost per run by
// their own counters (selfcost.h: about 1 run in 64 timed), as a metric of
// the hook: every run of it here is this process's send or receive on the
// counted port, but for other processes' sends, which return at the first
// comparison. ns/op is the system call's whole time, the program's
// included.

// BenchmarkResponseSend: the send program on one HTTP/1 response write.
func BenchmarkResponseSend(b *testing.B) {
	ln, port := rootListener(b)
	conn := connect(b, ln)
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nDate: Sun, 29 Nov 2026 12:00:00 GMT\r\n\r\nhello")
	p := openForBench(b, port, true)
	for b.Loop() {
		if _, err := conn.Write(resp); err != nil {
			b.Fatal(err)
		}
	}
	reportSelfCost(b, p, "sock:sock_send_length")
}

// BenchmarkRequestRead: the receive program on one read of a request
// line (the client's writes, on its ephemeral port, are left at the port
// test of the send program).
func BenchmarkRequestRead(b *testing.B) {
	ln, port := rootListener(b)
	client, server := pair(b, ln)
	req := []byte("GET /orders/17 HTTP/1.1\r\nHost: lab\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	p := openForBench(b, port, false)
	buf := make([]byte, len(req))
	for b.Loop() {
		if _, err := client.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(server, buf); err != nil {
			b.Fatal(err)
		}
	}
	reportSelfCost(b, p, "sock:sock_recv_length")
}

func openForBench(b *testing.B, port uint16, responsesOnly bool) *httpcount.Probe {
	p, err := httpcount.Open(httpcount.Options{TGID: os.Getpid(), Ports: []uint16{port}, ResponsesOnly: responsesOnly, Path: httpcount.PathSocket})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// reportSelfCost reports hook's self-timed ns per run and runs per op.
func reportSelfCost(b *testing.B, p *httpcount.Probe, hook string) {
	b.StopTimer()
	costs, err := p.SelfCosts()
	if err != nil {
		b.Fatal(err)
	}
	var runs, timed, ns uint64
	for _, c := range costs[hook] {
		runs += c.Runs
		timed += c.TimedRuns
		ns += c.TimedNs
	}
	if timed == 0 {
		b.Fatalf("%s: no timed run in %d", hook, runs)
	}
	b.ReportMetric(float64(ns)/float64(timed), "bpf-ns/run")
	b.ReportMetric(float64(runs)/float64(b.N), "runs/op")
}
