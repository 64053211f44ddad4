package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

// perfscope tcp --port P on a port nobody listens on, while the lab's
// sender opens 30 connections to it: each SYN is refused (an RST back,
// no retransmit) and dropped with NO_SOCKET, so data.tcp.drops has
// exactly 30 NO_SOCKET drops on P (with --exact: counted, not scaled),
// as many as the receiver namespace's resets sent (nstat TcpOutRsts), and
// tcp.no-listener names the port. Run inside the receiver's namespace,
// and from the host's with --pid of a process in the receiver's: the
// probe then counts that namespace's drops, not perfscope's own.
func TestTCPDropsNoSocketPerPort(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	for _, fromHost := range []bool{false, true} {
		name := "in-namespace"
		if fromHost {
			name = "pid-in-another-namespace"
		}
		t.Run(name, func(t *testing.T) { noSocketDrops(t, bin, fromHost) })
	}
}

func noSocketDrops(t *testing.T, bin string, fromHost bool) {
	ctx, lab := tcpLab(t, 1)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)

	const port, syns = 9, 30
	rstsBefore := nstatCounter(t, ctx, lab, lab.ReceiverNS, "TcpOutRsts")
	var out, stderr bytes.Buffer
	ps := lab.Command(ctx, lab.ReceiverNS, bin, "tcp", "--iface", lab.ReceiverIf, "--port", fmt.Sprint(port),
		"--exact", "--duration", "8s", "--no-profile", "-o", "json")
	if fromHost {
		// A process of the receiver's namespace for --pid; perfscope
		// itself runs in the host's, on its loopback.
		holder := lab.Command(ctx, lab.ReceiverNS, "sleep", "60")
		if err := lab.Start(holder); err != nil {
			t.Fatal(err)
		}
		defer func() { holder.Process.Kill(); holder.Wait() }()
		ps = exec.CommandContext(ctx, bin, "tcp", "--iface", "lo", "--port", fmt.Sprint(port), "--pid", fmt.Sprint(holder.Process.Pid),
			"--exact", "--duration", "8s", "--no-profile", "-o", "json")
	}
	ps.Stdout, ps.Stderr = &out, &stderr
	if err := lab.Start(ps); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	sentAt := time.Now()
	script := fmt.Sprintf("for i in $(seq %d); do (exec 3<>/dev/tcp/%s/%d) 2>/dev/null && echo connected; done; true", syns, lab.ReceiverAddr, port)
	if o, err := lab.Run(ctx, lab.SenderNS, "bash", "-c", script); err != nil || o != "" {
		t.Fatalf("connects: %v %q", err, o)
	}
	sentDone := time.Now()
	if err := ps.Wait(); err != nil {
		t.Fatalf("perfscope tcp: %v\n%s", err, stderr.String())
	}
	rsts := nstatCounter(t, ctx, lab, lab.ReceiverNS, "TcpOutRsts") - rstsBefore

	var rep struct {
		Meta struct {
			Started time.Time `json:"started"`
		} `json:"meta"`
		Data     evidence.NetEvidence `json:"data"`
		Findings []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	end := rep.Meta.Started.Add(time.Duration(rep.Data.DurationNs))
	if rep.Meta.Started.After(sentAt) || end.Before(sentDone) {
		t.Fatalf("the window %v–%v does not hold the connects %v–%v (a slow start on a busy machine): rerun", rep.Meta.Started, end, sentAt, sentDone)
	}
	if rep.Data.TCP == nil {
		t.Fatalf("no data.tcp: %s", out.String())
	}
	d := rep.Data.TCP.Drops
	t.Logf("drops %+v; TcpOutRsts %d", d, rsts)
	if d.Unavailable != "" || d.Estimate != nil {
		t.Fatalf("drops unavailable or scaled under --exact: %+v", d)
	}
	var noSocket uint64
	for _, r := range d.ByPort {
		if r.Port != port && r.Port != 0 {
			t.Errorf("--port %d let through %+v", port, r)
		}
		if r.Port == port && r.Reason == "NO_SOCKET" {
			noSocket = r.Count
		}
	}
	if noSocket != syns || rsts != syns {
		t.Errorf("port %d: %d NO_SOCKET drops, %d SYNs sent, %d resets sent (TcpOutRsts)", port, noSocket, syns, rsts)
	}
	fired := false
	for _, f := range rep.Findings {
		fired = fired || f.ID == "tcp.no-listener" && strings.Contains(f.Title, fmt.Sprintf("to port %d dropped", port))
	}
	if !fired {
		t.Errorf("tcp.no-listener did not name port %d: %+v", port, rep.Findings)
	}
	testutil.AssertNoNewBPF(t, progs, maps)
}
