package measure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/report"
)

// replayNet runs the udp runner's parts over a recorded fixture: the
// probes hand back the recorded snapshots, /proc and /sys are the
// fixture's start/ and end/ (switched between the window's two readings),
// ethtool and netlink are recorded too. No root, no kernel.
func replayNet(t *testing.T, fixture string) (measure.NetResult, replay.Recording) {
	t.Helper()
	src, rec, root := replay.Sources(t, fixture)
	return replayNetFrom(t, src, rec, root), rec
}

// replayNetFrom is replayNet over sources the caller may have changed.
func replayNetFrom(t *testing.T, src measure.Sources, rec replay.Recording, root *replay.PhasedRoot) measure.NetResult {
	t.Helper()
	o := measure.NetOptions{Iface: rec.Iface, Port: rec.Port}
	profileHz := 0
	if rec.CPUProfile != nil {
		profileHz = rec.Frequency
	}
	n := measure.NewNetParts(o, lockstat.DefaultStackEvery, profileHz)
	s, err := measure.Open(src, n.List()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.Measure(context.Background(), measure.Window{Duration: time.Millisecond, OnStart: func() { root.Flip(t) }})
	if err != nil {
		t.Fatal(err)
	}
	res := n.Assemble(src, o, measure.Run{})
	res.Run = run
	return res
}

// The udp runner's evidence assembly, from a recorded loopback flood into
// one socket: every section is built from the recording alone, equal to
// the replay.Golden evidence, and shows what the flood did.
func TestNetEvidenceFromRecording(t *testing.T) {
	res, rec := replayNet(t, netFixture)
	ev := res.Evidence
	b, err := json.MarshalIndent(ev, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	replay.Golden(t, filepath.Join(netFixture, "evidence.golden.json"), append(b, '\n'))

	// The window is the softirq probe's, as recorded.
	if want := rec.Softirq[1].Taken.Sub(rec.Softirq[0].Taken); ev.DurationNs != int64(want) || want < 900*time.Millisecond {
		t.Errorf("window %v, recorded %v", time.Duration(ev.DurationNs), want)
	}
	// NET_RX ran on the flood's CPUs, and the probe agrees with
	// /proc/softirqs read beside it.
	if len(ev.Softirq.NetRXCPUs()) == 0 {
		t.Error("no NET_RX CPU under a loopback flood")
	}
	for _, a := range ev.Softirq.Totals {
		if a.Vector == "NET_RX" && (a.Probe < 1000 || a.Diff > 0.03 || a.Diff < -0.03) {
			t.Errorf("NET_RX: probe %d vs /proc %d (%+.2f%%)", a.Probe, a.ProcCount, a.Diff*100)
		}
	}
	// lo: one queue each way, which records no RX queue (the kernel
	// counts transmits on TX queue 0), no driver counters, no NAPI.
	if len(ev.Queues.TX) != 1 || ev.Queues.TX[0].KernelPackets == nil || *ev.Queues.TX[0].KernelPackets < 1000 ||
		len(ev.Queues.RX) != 1 || ev.Queues.RX[0].DriverPackets != nil {
		t.Errorf("queues = %+v", ev.Queues)
	}
	if !strings.Contains(ev.QueueCPU.Unavailable, "no NAPI instance") || !strings.Contains(ev.IRQs.Unavailable, "virtual device") {
		t.Errorf("queue×CPU %q, IRQs %q", ev.QueueCPU.Unavailable, ev.IRQs.Unavailable)
	}
	// The flood's socket: found on its port, its reads counted, and its
	// locks' wait attributed to it and to this process.
	if len(ev.Sockets.Sockets) != 1 || ev.Sockets.Sockets[0].ReceivedPkt == nil || *ev.Sockets.Sockets[0].ReceivedPkt == 0 {
		t.Fatalf("sockets = %+v", ev.Sockets)
	}
	sock := ev.Sockets.Sockets[0]
	if len(ev.Locks.Sockets) == 0 || ev.Locks.Sockets[0].Socket.Inode != sock.Inode || ev.Locks.Sockets[0].Socket.Port != rec.Port ||
		ev.Locks.Sockets[0].Socket.PID == 0 || ev.Locks.Sockets[0].Socket.Comm == "" {
		t.Errorf("lock wait by socket = %+v, want the flood's socket %d first, with its owner", ev.Locks.Sockets, sock.Inode)
	}
	if ev.Locks.ByClass["socket-receive-queue"]+ev.Locks.ByClass["socket-wakeup"] == 0 {
		t.Errorf("lock classes = %v, want socket locks", ev.Locks.ByClass)
	}
	// Drops of the flood's port by reason, with the SNMP counters.
	if len(ev.Drops.ByPort) == 0 || ev.Drops.ByPort[0].Port != rec.Port || !strings.Contains(ev.Drops.ByPort[0].Reason, "SOCKET_RCVBUFF") {
		t.Errorf("drops by port = %+v", ev.Drops.ByPort)
	}
	if n, ok := ev.Drops.RcvbufErrors(); !ok || n == 0 {
		t.Errorf("SNMP RcvbufErrors = %d, %v", n, ok)
	}
	// The profile is named from the recorded kallsyms lines and split by
	// the same NET_RX CPUs the softirq section names.
	if ev.Profile.Samples == 0 || fmt.Sprint(ev.Profile.NetRXCPUs) != fmt.Sprint(ev.Softirq.NetRXCPUs()) {
		t.Errorf("profile: %d samples, NET_RX CPUs %v (softirq says %v)", ev.Profile.Samples, ev.Profile.NetRXCPUs, ev.Softirq.NetRXCPUs())
	}
	if res.Flames["all"].Total() != int64(ev.Profile.Samples) || res.Flames["netrx"].Total()+res.Flames["other"].Total() != res.Flames["all"].Total() {
		t.Errorf("flame split: all %d = netrx %d + other %d? samples %d", res.Flames["all"].Total(), res.Flames["netrx"].Total(), res.Flames["other"].Total(), ev.Profile.Samples)
	}
	if g, ok := ev.Profile.Group("socket-lock"); !ok || g.Samples == 0 {
		t.Errorf("socket-lock group = %+v: the flood spins on the socket's lock", g)
	}
}

// The report of a recorded run: findings from the rules, and the text
// renderer names the socket and its owner.
func TestNetReportFromRecording(t *testing.T) {
	res, rec := replayNet(t, netFixture)
	r := res.Report("test")
	if r.Command != "udp" || r.Overhead == nil || r.Overhead.AttachMethod != rec.Method {
		t.Errorf("report %s, overhead %+v", r.Command, r.Overhead)
	}
	var text bytes.Buffer
	if err := report.Render(&text, r, report.Text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("127.0.0.1:%d", rec.Port), "kfree_skb:SOCKET_RCVBUFF", "Findings", "perfscope's own cost"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text does not say %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := report.Render(&js, r, report.JSON); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Data evidence.NetEvidence `json:"data"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Data.Port != rec.Port {
		t.Errorf("JSON round trip: %v, port %d", err, back.Data.Port)
	}
}
