package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

// perfscope tcp run in the host's namespace with --pid of nginx in a
// namespace the test creates reads that namespace's TCP layer: nginx's
// listener with its pid, the namespace's somaxconn (set to 777 there,
// not the host's), and PassiveOpens equal to nstat's inside it over the
// window in which ab opened its connections.
func TestTCPPidInAnotherNetns(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	nginx := testutil.RequireTool(t, "nginx", "scripts/deps.sh test installs nginx-light")
	ab := testutil.RequireTool(t, "ab", "scripts/deps.sh test installs apache2-utils")
	bin := Perfscope(t)
	ctx, lab := tcpLab(t, 2)
	progs, maps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	if out, err := lab.Run(ctx, lab.ReceiverNS, "sysctl", "-qw", "net.core.somaxconn=777"); err != nil {
		t.Fatalf("sysctl: %v\n%s", err, out)
	}
	host, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil || strings.TrimSpace(string(host)) == "777" {
		t.Fatalf("the host's somaxconn is %q (%v): the test cannot tell the namespaces apart", host, err)
	}
	srv, pid := startNginx(t, ctx, lab, nginx)
	defer func() {
		srv.Cancel()
		srv.Wait()
	}()
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}

	before := nstatCounter(t, ctx, lab, lab.ReceiverNS, "TcpPassiveOpens")
	var out, stderr bytes.Buffer
	// perfscope in the host's namespace, measuring its loopback.
	ps := exec.CommandContext(ctx, bin, "tcp", "--iface", "lo", "--pid", strconv.Itoa(pid), "--port", strconv.Itoa(tcpLabPort),
		"--duration", "8s", "--no-profile", "-o", "json")
	ps.Stdout, ps.Stderr = &out, &stderr
	if err := ps.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	loadAt := time.Now()
	const requests = 40
	url := fmt.Sprintf("http://%s:%d/", lab.ReceiverAddr, tcpLabPort)
	if o, err := lab.Run(ctx, lab.SenderNS, ab, "-q", "-n", strconv.Itoa(requests), "-c", "1", url); err != nil {
		t.Fatalf("ab: %v\n%s", err, o)
	}
	loadDone := time.Now()
	if err := ps.Wait(); err != nil {
		t.Fatalf("perfscope tcp: %v\n%s", err, stderr.String())
	}
	after := nstatCounter(t, ctx, lab, lab.ReceiverNS, "TcpPassiveOpens")

	var rep struct {
		Meta struct {
			Started time.Time `json:"started"`
		} `json:"meta"`
		Data evidence.NetEvidence `json:"data"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	end := rep.Meta.Started.Add(time.Duration(rep.Data.DurationNs))
	if rep.Meta.Started.After(loadAt) || end.Before(loadDone) {
		t.Fatalf("the window %v–%v does not hold the load %v–%v (a slow start on a busy machine): rerun", rep.Meta.Started, end, loadAt, loadDone)
	}
	tcp := rep.Data.TCP
	if tcp == nil || tcp.Counters.Window == nil {
		t.Fatalf("no data.tcp counters: %s", out.String())
	}
	if tcp.Netns != theirs {
		t.Errorf("netns %q, want nginx's %q", tcp.Netns, theirs)
	}
	if tcp.Settings.Somaxconn == nil || *tcp.Settings.Somaxconn != 777 {
		t.Errorf("somaxconn %v (%s), want the namespace's 777", tcp.Settings.Somaxconn, tcp.SettingsUnavailable)
	}
	got, want := tcp.Counters.Window.PassiveOpens, after-before
	t.Logf("PassiveOpens: perfscope %d, nstat in the namespace %d → %d", got, before, after)
	if want < requests || got != want {
		t.Errorf("perfscope's PassiveOpens %d, the namespace's %d (ab made %d)", got, want, requests)
	}
	if len(tcp.Listeners.Rows) != 1 || tcp.Listeners.Rows[0].Local.Port() != tcpLabPort || !slices.Contains(tcp.Listeners.Rows[0].PIDs, pid) || tcp.Listeners.Rows[0].Comm != "nginx" {
		t.Errorf("listeners %+v (%s), want nginx's on %d", tcp.Listeners.Rows, tcp.Listeners.Unavailable, tcpLabPort)
	}
	if tcp.Events.Unavailable != "" || tcp.Connections.Unavailable != "" {
		t.Errorf("events %q, connections %q", tcp.Events.Unavailable, tcp.Connections.Unavailable)
	}

	srv.Cancel()
	srv.Wait()
	lab.Close()
	testutil.AssertNoNewBPF(t, progs, maps)
}
