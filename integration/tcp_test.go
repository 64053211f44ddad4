package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
)

const tcpLabPort = 8080

// nginxConf is a one-process nginx (Debian's nginx-light) on the lab's
// receiver address with a listen backlog of 8.
func nginxConf(dir, addr string) string {
	return fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 512; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	server {
		listen %[2]s:%[3]d backlog=8;
		location / { return 200 "ok\n"; }
	}
}
`, dir, addr, tcpLabPort)
}

// startNginx runs nginx (nginxConf) in the lab's receiver namespace and
// waits until it listens; the caller stops it (srv.Cancel, srv.Wait).
func startNginx(t *testing.T, ctx context.Context, lab *netlab.Lab, nginx string) (*exec.Cmd, int) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, lab.ReceiverAddr.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := lab.Command(ctx, lab.ReceiverNS, nginx, "-c", conf, "-p", dir)
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := lab.Start(srv); err != nil {
		t.Fatal(err)
	}
	listening := false
	for i := 0; i < 100 && !listening; i++ {
		out, _ := lab.Run(ctx, lab.ReceiverNS, "ss", "-Hltn", fmt.Sprintf("sport = :%d", tcpLabPort))
		listening = strings.Contains(out, fmt.Sprintf(":%d", tcpLabPort))
		if !listening {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !listening {
		srv.Cancel()
		srv.Wait()
		t.Fatalf("nginx did not listen: %s", srvOut.String())
	}
	return srv, srv.Process.Pid // ip netns exec execs nginx
}

// listenOverflows reads TcpExtListenOverflows of the lab namespace ns
// with nstat (iproute2), the kernel's own counter as users read it.
func listenOverflows(t *testing.T, ctx context.Context, lab *netlab.Lab, ns string) uint64 {
	t.Helper()
	return nstatCounter(t, ctx, lab, ns, "TcpExtListenOverflows")
}

// nstatCounter reads one counter of the lab namespace ns with nstat.
func nstatCounter(t *testing.T, ctx context.Context, lab *netlab.Lab, ns, name string) uint64 {
	t.Helper()
	out, err := lab.Run(ctx, ns, "nstat", "-az", "--json", name)
	if err != nil {
		t.Fatalf("nstat: %v\n%s", err, out)
	}
	var doc struct {
		Kernel map[string]uint64 `json:"kernel"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nstat json: %v\n%s", err, out)
	}
	v, ok := doc.Kernel[name]
	if !ok {
		t.Fatalf("nstat printed no %s: %s", name, out)
	}
	return v
}

// tcpLab is a TCP test's lab of netlab's two namespaces with queues RX
// queues, and a context of 2 minutes for the test: both end with it.
func tcpLab(t *testing.T, queues int) (context.Context, *netlab.Lab) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	lab, err := netlab.New(ctx, netlab.Config{Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	return ctx, lab
}

// perfscope tcp against nginx, whose listen backlog of 8 overflows while
// the server is stopped and 24 ab clients connect at once: the report's
// ListenOverflows equal the namespace's over the window (nstat before and
// after; nothing overflows outside it), the sampled accept queue of
// nginx's listener is seen full, and tcp.accept-overflow names it.
func TestTCPAcceptOverflowOnNginx(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	nginx := testutil.RequireTool(t, "nginx", "scripts/deps.sh test installs nginx-light")
	ab := testutil.RequireTool(t, "ab", "scripts/deps.sh test installs apache2-utils")
	bin := Perfscope(t)
	ctx, lab := tcpLab(t, 2)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	srv, pid := startNginx(t, ctx, lab, nginx)
	stopped := false
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		srv.Cancel()
		srv.Wait()
	}()

	before := listenOverflows(t, ctx, lab, lab.ReceiverNS)
	var out, stderr bytes.Buffer
	ps := lab.Command(ctx, lab.ReceiverNS, bin, "tcp", "--iface", lab.ReceiverIf, "--port", strconv.Itoa(tcpLabPort),
		"--pid", strconv.Itoa(pid), "--duration", "12s", "--no-profile", "-o", "json")
	ps.Stdout, ps.Stderr = &out, &stderr
	if err := lab.Start(ps); err != nil {
		t.Fatal(err)
	}
	// The burst, well inside the window: nginx stops, 24 ab processes
	// connect at once (9 fit in the queue; the others' handshakes
	// overflow and are retried 1 s and 3 s later), nginx resumes 2 s
	// later and serves them all. One ab process per connection: ab
	// opens its first connection alone and waits for its answer before
	// opening the others, so one ab with -c 24 would not burst while
	// the server is stopped.
	time.Sleep(4 * time.Second)
	stopAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped = true
	url := fmt.Sprintf("http://%s:%d/", lab.ReceiverAddr, tcpLabPort)
	const clients = 24
	loads := make([]*exec.Cmd, clients)
	loadOuts := make([]bytes.Buffer, clients)
	for i := range loads {
		loads[i] = lab.Command(ctx, lab.SenderNS, ab, "-q", "-n", "1", "-c", "1", "-s", "20", url)
		loads[i].Stdout, loads[i].Stderr = &loadOuts[i], &loadOuts[i]
		if err := lab.Start(loads[i]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	for i, load := range loads {
		if err := load.Wait(); err != nil {
			t.Fatalf("ab: %v\n%s", err, loadOuts[i].String())
		}
		if !strings.Contains(loadOuts[i].String(), "Complete requests:      1\n") {
			t.Errorf("ab did not complete its request:\n%s", loadOuts[i].String())
		}
	}
	loadDone := time.Now()
	if err := ps.Wait(); err != nil {
		t.Fatalf("perfscope tcp: %v\n%s", err, stderr.String())
	}
	after := listenOverflows(t, ctx, lab, lab.ReceiverNS)

	var rep struct {
		Meta struct {
			Started time.Time `json:"started"`
		} `json:"meta"`
		Data     evidence.NetEvidence `json:"data"`
		Findings []struct {
			ID       string   `json:"id"`
			Evidence []string `json:"evidence"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	// The window must hold the whole burst for the counts to compare.
	end := rep.Meta.Started.Add(time.Duration(rep.Data.DurationNs))
	if rep.Meta.Started.After(stopAt) || end.Before(loadDone) {
		t.Fatalf("the window %v–%v does not hold the burst %v–%v (a slow start on a busy machine): rerun", rep.Meta.Started, end, stopAt, loadDone)
	}
	tcp := rep.Data.TCP
	if tcp == nil || tcp.Counters.Window == nil {
		t.Fatalf("no data.tcp counters: %s", out.String())
	}
	got, want := tcp.Counters.Window.ListenOverflows, after-before
	t.Logf("ListenOverflows: perfscope %d, nstat %d → %d (%d)", got, before, after, want)
	if want == 0 {
		t.Fatalf("the burst overflowed nothing (nstat %d → %d): the test measured nothing", before, after)
	}
	if got != want {
		t.Errorf("perfscope's ListenOverflows %d, the namespace's %d", got, want)
	}
	var l *evidence.TCPListener
	for i, row := range tcp.Listeners.Rows {
		if row.Local.Port() == tcpLabPort {
			l = &tcp.Listeners.Rows[i]
		}
	}
	if l == nil {
		t.Fatalf("no listener on port %d: %+v", tcpLabPort, tcp.Listeners)
	}
	t.Logf("listener %+v", *l)
	if l.Backlog != 8 || l.QueuePeak != 9 || l.FullSamples == 0 || l.Comm != "nginx" || !slices.Contains(l.PIDs, pid) {
		t.Errorf("listener %+v: want backlog 8, a peak of 9 (full), nginx pid %d", *l, pid)
	}
	found := false
	for _, f := range rep.Findings {
		if f.ID == "tcp.accept-overflow" {
			found = true
			if !strings.Contains(strings.Join(f.Evidence, "\n"), l.Local.String()) {
				t.Errorf("tcp.accept-overflow does not name the listener %s: %q", l.Local, f.Evidence)
			}
		}
		if f.ID == "net.gro-udp" {
			t.Errorf("a TCP run advises turning GRO off: %q", f.Evidence)
		}
	}
	if !found {
		t.Errorf("no tcp.accept-overflow finding: %+v", rep.Findings)
	}
	if tcp.Connections.Unavailable != "" || tcp.Events.Unavailable != "" {
		t.Errorf("connections %q, events %q", tcp.Connections.Unavailable, tcp.Events.Unavailable)
	}

	srv.Cancel()
	srv.Wait()
	lab.Close()
	testutil.AssertNoNewBPF(t, progs, maps)
}

// perfscope tcp names nginx's half-open connections: the sender's
// namespace lets only SYNs through to the port (nftables), so each of six
// clients gets a SYN-ACK, its handshake's last ACK never arrives and the
// connection waits in nginx's SYN queue (the kernel retransmits the
// SYN-ACK for a minute). The report's SYN queue peak for the listener
// equals what ss counts in state SYN-RECV in the same window.
func TestTCPSynQueueOnNginx(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	nginx := testutil.RequireTool(t, "nginx", "scripts/deps.sh test installs nginx-light")
	bin := Perfscope(t)
	ctx, lab := tcpLab(t, 2)
	srv, pid := startNginx(t, ctx, lab, nginx)
	defer func() {
		srv.Cancel()
		srv.Wait()
	}()
	for _, rule := range [][]string{
		{"add", "table", "inet", "synonly"},
		{"add", "chain", "inet", "synonly", "out", "{ type filter hook output priority 0 ; }"},
		{"add", "rule", "inet", "synonly", "out", "tcp", "dport", strconv.Itoa(tcpLabPort), "tcp", "flags", "!=", "syn", "drop"},
	} {
		if out, err := lab.Run(ctx, lab.SenderNS, append([]string{"nft"}, rule...)...); err != nil {
			t.Fatalf("nft %v: %v\n%s", rule, err, out)
		}
	}

	var out, stderr bytes.Buffer
	ps := lab.Command(ctx, lab.ReceiverNS, bin, "tcp", "--iface", lab.ReceiverIf, "--port", strconv.Itoa(tcpLabPort),
		"--duration", "6s", "--no-profile", "-o", "json")
	ps.Stdout, ps.Stderr = &out, &stderr
	if err := lab.Start(ps); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	const clients = 6
	script := fmt.Sprintf("for i in $(seq %d); do timeout 8 bash -c 'exec 3<>/dev/tcp/%s/%d; sleep 7' & done; wait",
		clients, lab.ReceiverAddr, tcpLabPort)
	load := lab.Command(ctx, lab.SenderNS, "bash", "-c", script)
	if err := lab.Start(load); err != nil {
		t.Fatal(err)
	}
	defer load.Wait()
	var ssCount int
	for i := 0; i < 40 && ssCount < clients; i++ {
		time.Sleep(50 * time.Millisecond)
		o, _ := lab.Run(ctx, lab.ReceiverNS, "ss", "-Htn", "state", "syn-recv", fmt.Sprintf("sport = :%d", tcpLabPort))
		if strings.TrimSpace(o) == "" {
			ssCount = 0
		} else {
			ssCount = strings.Count(strings.TrimSpace(o), "\n") + 1
		}
	}
	if ssCount != clients {
		t.Fatalf("ss counts %d connections in SYN-RECV, want %d: the test set nothing up", ssCount, clients)
	}
	if err := ps.Wait(); err != nil {
		t.Fatalf("perfscope tcp: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Data evidence.NetEvidence `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if rep.Data.TCP == nil {
		t.Fatalf("no data.tcp: %s", out.String())
	}
	var l *evidence.TCPListener
	for i, row := range rep.Data.TCP.Listeners.Rows {
		if row.Local.Port() == tcpLabPort {
			l = &rep.Data.TCP.Listeners.Rows[i]
		}
	}
	if l == nil {
		t.Fatalf("no listener on port %d: %+v", tcpLabPort, rep.Data.TCP.Listeners)
	}
	t.Logf("listener %+v; ss: %d in SYN-RECV", *l, ssCount)
	if l.SynQueuePeak != clients || l.SynQueueLast != clients || l.SynFullSamples != 0 || l.Comm != "nginx" || !slices.Contains(l.PIDs, pid) {
		t.Errorf("listener %+v: want a SYN queue of %d at its peak and at the end (backlog 8: never full), nginx pid %d", *l, clients, pid)
	}
}
