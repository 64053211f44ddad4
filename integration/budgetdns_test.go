package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes/softirq"
)

// A real DNS server nobody here wrote — Knot DNS, answering dnsperf over
// the lab's 4-queue veth rig — measured by a 5 s `perfscope udp` with the
// default budget: the run the sections once came out of "estimated from
// 1 windows … error unknown", the softirq section ±211 %, and the server's
// reads 27 % low inside ±57 % though it was its namespace's only reader.
// Now the reads are the namespace's exact UDP read count (the probe counts
// the server's share itself: 1 in every window), the softirq times are
// scaled by the kernel's softirqs, every sampled section that saw
// anything has a bound, and every bound wider than ±10 % says what
// --duration would bring it there. The load is paced, so the test does
// not take a shared machine whole.
func TestBudgetDNSServer(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	for _, tool := range []string{"knotd", "dnsperf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (bash scripts/deps.sh test: knot, dnsperf): %v", tool, err)
		}
	}
	lab, err := netlab.New(context.Background(), netlab.Config{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	bin := Perfscope(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir := t.TempDir()
	zone := "$ORIGIN example.\n$TTL 3600\n@ SOA ns.example. admin.example. 1 3600 900 604800 300\n@ NS ns.example.\nns A 198.18.0.2\nwww A 198.18.0.10\n"
	conf := fmt.Sprintf(`server:
    listen: %s@53
    rundir: %[2]s
    udp-workers: 2
    tcp-workers: 1
    background-workers: 1
database:
    storage: %[2]s/db
zone:
  - domain: example
    file: %[2]s/example.zone
log:
  - target: stderr
    any: warning
`, lab.ReceiverAddr, dir)
	queries := strings.Repeat("www.example A\n", 20)
	for name, text := range map[string]string{"example.zone": zone, "knot.conf": conf, "queries.txt": queries} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	knot := lab.Command(ctx, lab.ReceiverNS, "knotd", "-c", filepath.Join(dir, "knot.conf"))
	var knotErr lockedBuffer
	knot.Stderr = &knotErr
	if err := lab.Start(knot); err != nil {
		t.Fatal(err)
	}
	defer func() { knot.Cancel(); knot.Wait() }()
	// knotd listens within a second; dnsperf's first queries would time
	// out otherwise.
	time.Sleep(1500 * time.Millisecond)
	perf := lab.Command(ctx, lab.SenderNS, "dnsperf", "-s", lab.ReceiverAddr.String(), "-d", filepath.Join(dir, "queries.txt"),
		"-l", "14", "-c", "8", "-T", "2", "-Q", "40000")
	var perfOut lockedBuffer
	perf.Stdout, perf.Stderr = &perfOut, &perfOut
	if err := lab.Start(perf); err != nil {
		t.Fatal(err)
	}
	defer func() { perf.Cancel(); perf.Wait() }()
	time.Sleep(2 * time.Second)

	var out, stderr bytes.Buffer
	cmd := lab.Command(ctx, lab.ReceiverNS, bin, "udp", "--iface", lab.ReceiverIf, "--port", "53", "--duration", "5s", "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perfscope udp: %v\n%s\nknotd: %s", err, stderr.String(), knotErr.String())
	}
	var rep udpReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}

	// The reads: every socket of port 53 (knot's workers) against the
	// namespace's InDatagrams over the same window.
	s := rep.Data.Sockets
	var reads float64
	for _, sock := range s.Sockets {
		if sock.ReceivedPkt != nil {
			reads += float64(*sock.ReceivedPkt)
		}
	}
	snmp := rep.Data.Drops.UDPSNMP
	if snmp == nil || snmp.UDP.InDatagrams < 20000 || s.Estimate == nil {
		t.Fatalf("knot read too little to judge (snmp %+v, sockets %+v, estimate %v); knotd: %s dnsperf: %s",
			snmp, s.Sockets, s.Estimate, knotErr.String(), perfOut.String())
	}
	kernel := float64(snmp.UDP.InDatagrams + snmp.UDP6.InDatagrams)
	t.Logf("knot's reads %.0f (%v); the namespace's InDatagrams %.0f", reads, s.Estimate, kernel)
	if s.Estimate.Reference != budget.UDPReadsReference || s.Estimate.RelError == nil || *s.Estimate.RelError > 0.002 {
		t.Errorf("the sole reader's reads scaled by %q ±%s, want the namespace's UDP reads ±0", s.Estimate.Reference, pctOf(s.Estimate.RelError))
	}
	if diff := math.Abs(reads/kernel - 1); diff > 0.005 {
		t.Errorf("knot read %.0f by the estimate, the kernel counted %.0f: %.2f %% apart", reads, kernel, 100*diff)
	}

	// Every sampled group: a bound when it saw anything, and a run length
	// when the bound is wider than ±10 %.
	checkBudget(t, rep.Overhead, budget.Default, 0.06)
	for _, g := range rep.Overhead.Budget.Groups {
		e := g.Estimate
		if g.Exact || e == nil {
			continue
		}
		switch {
		case e.SampledEvents > 0 && e.RelError == nil:
			t.Errorf("%s: %d events seen in %d windows and no bound", g.Group, e.SampledEvents, e.Windows)
		case e.RelError != nil && *e.RelError > 0.10 && e.DurationFor10PctNs == 0:
			t.Errorf("%s: ±%s and no --duration that would bound it to ±10 %%", g.Group, pctOf(e.RelError))
		}
		if g.Group == softirq.Group && e.Reference != budget.SoftirqsReference {
			t.Errorf("softirq scaled by %q, want the kernel's softirqs", e.Reference)
		}
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
