package measure_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/tcpevents"
)

// --pod keeps the listeners, connections and retransmit/reset rows of the
// sockets the pod's processes hold: an event is tied to the connection of
// its four-tuple, else to the listener of its local address, and one of a
// connection closed meanwhile with no listener is counted as
// unattributed; the totals stay the namespace's.
func TestTCPPartKeepsWorkload(t *testing.T) {
	src := measure.WorkloadHost(t)
	// Pod A's process 200 holds listener socket 1111; nginx (300) 2222.
	listenA := netip.MustParseAddrPort("10.0.0.1:9000")
	listenN := netip.MustParseAddrPort("10.0.0.1:80")
	connA := [2]netip.AddrPort{listenA, netip.MustParseAddrPort("10.0.0.2:40000")}
	connN := [2]netip.AddrPort{listenN, netip.MustParseAddrPort("10.0.0.3:40001")}
	src.TCPDiag = func(q tcpdiag.Query) ([]tcpdiag.Socket, error) {
		// Listed with or without the SYN queues, or looked up one by one.
		if len(q.Find) > 0 || q.States&tcpdiag.StatesOf(tcpdiag.Listen) != 0 {
			return []tcpdiag.Socket{
				{State: tcpdiag.Listen, Local: listenA, SendQ: 128, Inode: 1111, Cookie: 1},
				{State: tcpdiag.Listen, Local: listenN, SendQ: 511, Inode: 2222, Cookie: 2},
			}, nil
		}
		// The established sockets: pod A's (inode 1111 stands for the
		// accepted socket its process holds) and nginx's.
		return []tcpdiag.Socket{
			{State: tcpdiag.Established, Local: connA[0], Remote: connA[1], Inode: 1111, Cookie: 10},
			{State: tcpdiag.Established, Local: connN[0], Remote: connN[1], Inode: 2222, Cookie: 11},
		}, nil
	}
	key := func(local, remote netip.AddrPort, e tcpevents.Event) tcpevents.Key {
		return tcpevents.Key{Local: local, Remote: remote, Event: e, State: uint8(tcpdiag.Established)}
	}
	closedClient := key(netip.MustParseAddrPort("10.0.0.1:45000"), netip.MustParseAddrPort("10.0.0.9:443"), tcpevents.Retransmit)
	var end tcpevents.Snapshot
	end.Conns = map[tcpevents.Key]tcpevents.Count{
		key(connA[0], connA[1], tcpevents.Retransmit): {Events: 3, Segs: 3},
		// A SYN-ACK to a client that never completed: the listener's.
		key(listenA, netip.MustParseAddrPort("10.0.0.5:1234"), tcpevents.RetransmitSynAck): {Events: 2, Segs: 2},
		key(connN[0], connN[1], tcpevents.ResetSent):                                       {Events: 5, Segs: 5},
		// A client connection closed before the end: nobody to name.
		closedClient: {Events: 7, Segs: 7},
	}
	end.Totals[tcpevents.Retransmit] = tcpevents.Count{Events: 10, Segs: 10}
	src.Probes = measure.With(measure.Opener{}, &tcpevents.Spec, func(tcpevents.Options) (measure.TCPEventsProbe, error) {
		return replayTCPEvents{replay.New("tcpevents", []tcpevents.Snapshot{{}, end}, replay.Recording{Method: "tp_btf"})}, nil
	})

	f, err := cgroup.PodFilter(measure.PodA)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := measure.SelectWorkload(src, f)
	if err != nil {
		t.Fatal(err)
	}
	run := func(o measure.TCPOptions) *measure.TCP {
		o.SampleEvery = time.Hour
		p := measure.NewTCP(o)
		if err := p.Open(src); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := p.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.End(ctx); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := run(measure.TCPOptions{Select: sel})
	ev := p.Evidence(time.Second)
	if len(ev.Listeners.Rows) != 1 || ev.Listeners.Rows[0].Local != listenA || ev.Listeners.Rows[0].PIDs[0] != 200 {
		t.Errorf("listeners %+v (%s)", ev.Listeners.Rows, ev.Listeners.Unavailable)
	}
	if ev.Connections.Total != 1 || ev.Connections.Rows[0].Local != connA[0] {
		t.Errorf("connections %+v (%s)", ev.Connections.Rows, ev.Connections.Unavailable)
	}
	if len(ev.Events.Top) != 2 || ev.Events.Unattributed != 7 || ev.Events.Retransmits.Events != 10 {
		t.Errorf("events: top %+v, unattributed %d, totals %+v", ev.Events.Top, ev.Events.Unattributed, ev.Events.Retransmits)
	}
	for _, e := range ev.Events.Top {
		if e.Local.Port() != 9000 {
			t.Errorf("an event row of another workload kept: %+v", e)
		}
	}

	// Without a filter every row stays and nothing is unattributed.
	p = run(measure.TCPOptions{})
	ev = p.Evidence(time.Second)
	if len(ev.Listeners.Rows) != 2 || ev.Connections.Total != 2 || len(ev.Events.Top) != 4 || ev.Events.Unattributed != 0 {
		t.Errorf("unfiltered: %d listeners, %d connections, %d event rows, %d unattributed",
			len(ev.Listeners.Rows), ev.Connections.Total, len(ev.Events.Top), ev.Events.Unattributed)
	}
	// --pid follows the same rule.
	p = run(measure.TCPOptions{PID: 300})
	ev = p.Evidence(time.Second)
	if len(ev.Listeners.Rows) != 1 || ev.Listeners.Rows[0].Local != listenN || len(ev.Events.Top) != 1 || ev.Events.Top[0].Event != "reset_sent" {
		t.Errorf("--pid 300: listeners %+v, events %+v", ev.Listeners.Rows, ev.Events.Top)
	}
}
