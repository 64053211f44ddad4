package udpdrop

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/netstat"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/udpflood"
	"github.com/perfscope/perfscope/probes"
)

func TestReasonName(t *testing.T) {
	names := map[uint32]string{2: "NO_SOCKET", 7: "SOCKET_RCVBUFF"}
	for _, c := range []struct {
		kind   Kind
		reason uint32
		want   string
	}{
		{KfreeSkb, 7, "SOCKET_RCVBUFF"},
		{KfreeSkb, 999, "reason_999"},
		{FailQueueRcv, uint32(unix.ENOMEM), "ENOMEM"},
		{FailQueueRcv, 100000, "errno_100000"},
	} {
		if got := reasonName(names, c.kind, c.reason); got != c.want {
			t.Errorf("reasonName(%v, %d) = %q, want %q", c.kind, c.reason, got, c.want)
		}
	}
}

func TestSubKeepsOnlyNewDrops(t *testing.T) {
	k := PortKey{Port: 53, Family: unix.AF_INET, Kind: FailQueueRcv, Reason: uint32(unix.ENOMEM), Proto: ProtoUDP}
	idle := PortKey{Port: 54, Kind: KfreeSkb, Proto: ProtoUDP}
	prev := Snapshot{Ports: map[PortKey]uint64{k: 10, idle: 4}, Reasons: map[uint32]uint64{7: 1}}
	cur := Snapshot{Ports: map[PortKey]uint64{k: 25, idle: 4}, Reasons: map[uint32]uint64{7: 3, 2: 1}, Lost: Lost{Port: 2}}
	d := cur.Sub(prev)
	if d.Ports[k] != 15 || len(d.Ports) != 1 || d.Reasons[7] != 2 || d.Reasons[2] != 1 || d.Lost.Port != 2 {
		t.Errorf("delta = %+v", d)
	}
	if d.PortTotal(53, FailQueueRcv) != 15 || d.PortTotal(53, KfreeSkb) != 0 {
		t.Errorf("PortTotal wrong: %+v", d)
	}
}

func TestDropReasonNamesFromKernelBTF(t *testing.T) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Skipf("no kernel BTF: %v", err)
	}
	names, err := DropReasonNames(kernel)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range names {
		found = found || n == "SOCKET_RCVBUFF"
	}
	if !found {
		t.Errorf("SOCKET_RCVBUFF not among %d reasons", len(names))
	}
}

func reasonValue(t testing.TB, p *Probe, name string) uint32 {
	t.Helper()
	for v, n := range p.reasons {
		if n == name {
			return v
		}
	}
	t.Fatalf("drop reason %s unknown to this kernel", name)
	return 0
}

// A socket with a tiny receive buffer that nobody reads, flooded by two
// senders: every datagram past the first few is dropped, and the probe's
// per-port counts must match the kernel's RcvbufErrors.
//
// On this kernel (6.12+) kfree_skb names the socket and is the only hook;
// preRxSk runs the design for older kernels (udp_fail_queue_rcv_skb for
// ports, kfree_skb for reasons) on the same kernel.
func TestProbeCountsReceiveBufferDrops(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	if !kfreeSkbHasRxSk(kernel) {
		t.Fatal("this kernel's kfree_skb has no rx_sk argument: the test expects 6.12+")
	}
	// With a port the per-port counts go to an array; allPorts uses the
	// hash for every port.
	for _, c := range []struct {
		m                 probes.AttachMethod
		preRxSk, allPorts bool
	}{{probes.MethodBTF, false, false}, {probes.MethodRaw, false, false}, {probes.MethodTracepoint, false, false},
		{probes.MethodBTF, true, false}, {probes.MethodTracepoint, true, false}, {probes.MethodBTF, false, true}} {
		m := c.m
		name := string(m)
		if c.preRxSk {
			name += "/before-6.12"
		}
		if c.allPorts {
			name += "/all-ports"
		}
		t.Run(name, func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.SetReadBuffer(4096); err != nil {
				t.Fatal(err)
			}
			target := conn.LocalAddr().(*net.UDPAddr).AddrPort()
			opts := Options{Method: m, Port: target.Port(), preRxSk: c.preRxSk}
			if c.allPorts {
				opts.Port = 0
			}
			p, err := Open(opts)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if len(p.Missing()) != 0 {
				t.Errorf("hooks missing: %v", p.Missing())
			}
			if want := len(HooksFor(!c.preRxSk)); p.Attached.Links() != want {
				t.Errorf("%d hooks attached, want %d", p.Attached.Links(), want)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			snmpBefore, err := netstat.Default.UDPSNMP()
			if err != nil {
				t.Fatal(err)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{
				Target: target, Senders: 2, Duration: 300 * time.Millisecond, MaxPackets: 50000,
			})
			if err != nil {
				t.Fatal(err)
			}
			snmpAfter, err := netstat.Default.UDPSNMP()
			if err != nil {
				t.Fatal(err)
			}
			last, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)
			rcvbuf := snmpAfter.Sub(snmpBefore).UDP.RcvbufErrors
			failNoMem := d.Ports[PortKey{Port: target.Port(), Family: unix.AF_INET, Kind: FailQueueRcv, Reason: uint32(unix.ENOMEM), Proto: unix.IPPROTO_UDP}]
			rcvbuffReason := reasonValue(t, p, "SOCKET_RCVBUFF")
			kfree := d.Ports[PortKey{Port: target.Port(), Family: unix.AF_INET, Kind: KfreeSkb, Reason: rcvbuffReason, Proto: unix.IPPROTO_UDP}]
			t.Logf("sent %d; RcvbufErrors %d; udp_fail_queue_rcv_skb ENOMEM %d; kfree_skb SOCKET_RCVBUFF on port %d, all ports %d",
				res.Sent, rcvbuf, failNoMem, kfree, d.Reasons[rcvbuffReason])
			if rcvbuf < res.Sent/2 {
				t.Fatalf("only %d of %d datagrams dropped: the test did not overflow the socket", rcvbuf, res.Sent)
			}
			// Each drop is counted once per port: by kfree_skb where it
			// names the socket, else by udp_fail_queue_rcv_skb.
			counted, other, otherName := kfree, failNoMem, "udp_fail_queue_rcv_skb ENOMEM"
			if c.preRxSk {
				counted, other, otherName = failNoMem, kfree, "kfree_skb SOCKET_RCVBUFF"
			}
			if diff := float64(counted) - float64(rcvbuf); diff > 0.03*float64(rcvbuf) || -diff > 0.03*float64(rcvbuf) {
				t.Errorf("port %d: %d drops counted, /proc/net/snmp RcvbufErrors delta = %d: more than 3%% apart (%+v)", target.Port(), counted, rcvbuf, d.Ports)
			}
			if other != 0 {
				t.Errorf("port %d: %s = %d: the same drops counted twice", target.Port(), otherName, other)
			}
			if r := d.Reasons[rcvbuffReason]; r < counted {
				t.Errorf("kfree_skb SOCKET_RCVBUFF on all ports %d < %d on the port", r, counted)
			}
			for k := range d.Ports {
				// TCP drops not attributable to a port (port 0) pass
				// any port filter.
				if !c.allPorts && k.Port != target.Port() && (k.Proto != unix.IPPROTO_TCP || k.Port != 0) {
					t.Errorf("port filter let through %+v", k)
				}
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

func TestTargetPortKeyDecodesTheBPFLayout(t *testing.T) {
	for _, c := range []struct {
		idx  int
		want PortKey
	}{
		{0, PortKey{Port: 53, Kind: FailQueueRcv, Proto: unix.IPPROTO_UDP}},
		{1*reasonSlots + 12, PortKey{Port: 53, Family: unix.AF_INET, Kind: FailQueueRcv, Reason: 12, Proto: unix.IPPROTO_UDP}},
		{(1*familySlots+2)*reasonSlots + 6, PortKey{Port: 53, Family: unix.AF_INET6, Kind: KfreeSkb, Reason: 6, Proto: unix.IPPROTO_UDP}},
		{(1*familySlots+1)*reasonSlots + reasonSlots - 1, PortKey{Port: 53, Family: unix.AF_INET, Kind: KfreeSkb, Reason: reasonSlots - 1, Proto: unix.IPPROTO_UDP}},
	} {
		if got := targetPortKey(53, c.idx); got != c.want {
			t.Errorf("index %d: %+v, want %+v", c.idx, got, c.want)
		}
	}
}
