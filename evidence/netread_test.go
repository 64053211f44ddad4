package evidence

import "testing"

func TestDropsOnPortCountsADropOnce(t *testing.T) {
	e := NetEvidence{}
	e.Drops.ByPort = []PortDrops{
		{Port: 9000, Reason: "udp_fail_queue_rcv_skb:ENOMEM", Count: 100},
		{Port: 9000, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 100},
		{Port: 9000, Reason: "kfree_skb:NO_SOCKET", Count: 5},
		{Port: 53, Reason: "kfree_skb:SOCKET_RCVBUFF", Count: 7},
	}
	n, reasons := e.Drops.OnPort(9000)
	// Two tracepoints saw the same 100 drops; kfree_skb saw 5 more.
	if n != 105 || len(reasons) != 3 {
		t.Errorf("OnPort = %d %q, want 105 from 3 reasons", n, reasons)
	}
}
