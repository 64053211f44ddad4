package measure

import (
	"context"
	"testing"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/measure/budget"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/udpdrop"
)

// namedDrops is a drop probe that only names reasons.
type namedDrops struct{ DropProbe }

func (namedDrops) ReasonName(kind udpdrop.Kind, reason uint32) string {
	return map[uint32]string{3: "NO_SOCKET", 6: "SOCKET_RCVBUFF"}[reason]
}

func (namedDrops) Method() probes.AttachMethod { return probes.MethodBTF }

// TCP rows go to the TCP section only, summed over families, with the
// unattributable drops on port 0; the UDP section keeps its rows.
func TestDropsSplitTCPFromUDP(t *testing.T) {
	tcp := func(port uint16, family uint16, reason uint32) udpdrop.PortKey {
		return udpdrop.PortKey{Port: port, Family: family, Kind: udpdrop.KfreeSkb, Reason: reason, Proto: udpdrop.ProtoTCP}
	}
	udp := udpdrop.PortKey{Port: 5353, Family: 2, Kind: udpdrop.KfreeSkb, Reason: 6, Proto: udpdrop.ProtoUDP}
	p := NewDrops(DropOptions{})
	p.probe = namedDrops{}
	p.first = udpdrop.Snapshot{Ports: map[udpdrop.PortKey]uint64{tcp(7, 2, 3): 5}, Reasons: map[uint32]uint64{}}
	p.last = udpdrop.Snapshot{Ports: map[udpdrop.PortKey]uint64{tcp(7, 2, 3): 30, tcp(7, 10, 3): 4, tcp(0, 2, 3): 2, udp: 9},
		Reasons: map[uint32]uint64{3: 31, 6: 9}}

	var sec evidence.TCPDropSection
	p.AddTCP(&sec)
	want := []evidence.PortDrops{{Port: 7, Reason: "NO_SOCKET", Count: 29}, {Port: 0, Reason: "NO_SOCKET", Count: 2}}
	if sec.Unavailable != "" || len(sec.ByPort) != len(want) {
		t.Fatalf("TCP drops = %+v, want %+v", sec, want)
	}
	for i, r := range sec.ByPort {
		if r.Port != want[i].Port || r.Reason != want[i].Reason || r.Count != want[i].Count || r.RelError != nil {
			t.Errorf("row %d = %+v, want %+v", i, r, want[i])
		}
	}

	udpSec := evidence.DropSection{ByReason: map[string]uint64{}}
	p.Add(&udpSec)
	if len(udpSec.ByPort) != 1 || udpSec.ByPort[0].Port != 5353 || udpSec.ByPort[0].Count != 9 {
		t.Errorf("UDP drops = %+v, want port 5353's 9 only", udpSec.ByPort)
	}
}

// countingDrops is a drop probe whose one TCP row the test counts.
type countingDrops struct {
	namedDrops
	n *uint64
}

func (c countingDrops) Snapshot() (udpdrop.Snapshot, error) {
	key := udpdrop.PortKey{Port: 7, Family: 2, Kind: udpdrop.KfreeSkb, Reason: 3, Proto: udpdrop.ProtoTCP}
	return udpdrop.Snapshot{Ports: map[udpdrop.PortKey]uint64{key: *c.n}, Reasons: map[uint32]uint64{3: *c.n}}, nil
}

// Window after window on one session without a budget (perfscope serve
// --exact), the drops counted between two windows belong to the next:
// the windows add up to what the probe counted. Under a budget each
// window starts afresh (its sampled estimate covers its own time).
func TestDropWindowsAddUp(t *testing.T) {
	for _, budgeted := range []bool{false, true} {
		var n uint64
		p := NewDrops(DropOptions{})
		p.probe = countingDrops{n: &n}
		var sum uint64
		for w := 0; w < 3; w++ {
			if budgeted {
				p.SetCoverage(&budget.Coverage{})
			} else {
				p.SetCoverage(nil)
			}
			if err := p.Begin(context.Background()); err != nil {
				t.Fatal(err)
			}
			n += 5
			if err := p.End(context.Background()); err != nil {
				t.Fatal(err)
			}
			var sec evidence.TCPDropSection
			p.AddTCP(&sec)
			for _, r := range sec.ByPort {
				sum += r.Count
			}
			n += 100 // between the windows: serve judging and rendering
		}
		want := uint64(3*5 + 2*100)
		if budgeted {
			want = 15
		}
		if sum != want {
			t.Errorf("budget %v: three windows counted %d drops, want %d (the probe counted %d)", budgeted, sum, want, n-100)
		}
	}
}
