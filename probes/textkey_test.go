package probes_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/tcpevents"
	"github.com/perfscope/perfscope/probes/udpdrop"
)

// Snapshots keyed by structs survive a JSON round trip, negative fields
// (lockstat's NoStack, netqueue's Unrecorded) included.
func TestSnapshotsRoundTripJSON(t *testing.T) {
	q := netqueue.Snapshot{
		NAPI:       map[netqueue.NAPIKey][]netqueue.NAPIStats{{ID: 8193, Ifindex: 4}: {{Polls: 3, Work: 40}}},
		RXRaw:      map[netqueue.QueueKey][]netqueue.Traffic{{Ifindex: 4, Queue: netqueue.Unrecorded}: {{Packets: 7}}},
		NAPIQueues: map[netqueue.NAPIQueueKey]uint64{{NAPIID: 8193, Ifindex: 4, RawQueue: 2}: 9},
	}
	l := lockstat.Snapshot{Sites: map[lockstat.SiteKey]lockstat.WaitStats{{StackID: lockstat.NoStack, Flags: 1}: {Count: 2}},
		SockWaits: map[lockstat.SockWaitKey]lockstat.WaitStats{{Lock: 0xffff8881deadbeef, Kind: lockstat.SockWaitKind{Softirq: true, Owned: true}}: {Count: 3}}}
	d := udpdrop.Snapshot{Ports: map[udpdrop.PortKey]uint64{{Port: 9000, Family: 2, Kind: udpdrop.KfreeSkb, Reason: 6}: 11}}
	tc := tcpevents.Snapshot{Conns: map[tcpevents.Key]tcpevents.Count{
		{Local: netip.MustParseAddrPort("10.0.0.1:80"), Remote: netip.MustParseAddrPort("[2001:db8::7]:40000"), Event: tcpevents.Retransmit, State: 1, Detail: 2, Err: -11}: {Events: 3, Segs: 4},
		{Event: tcpevents.ResetSent}: {Events: 1, Segs: 1}, // a reset no socket owned
	}, Feeds: map[uint64]tcpevents.Feed{4242: {Softirq: []uint64{5, 0}, Process: 1, Reads: []uint64{0, 6}}}}
	for _, v := range []any{&q, &l, &d, &tc} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem())
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), reflect.ValueOf(v).Elem().Interface()) {
			t.Errorf("round trip of %s changed it: %+v", b, back.Elem().Interface())
		}
	}
	if err := json.Unmarshal([]byte(`{"1/2/3":1}`), &map[netqueue.QueueKey]int{}); err == nil {
		t.Error("a key with a field too many was accepted")
	}
}

func TestCommString(t *testing.T) {
	var c [16]int8
	for i, b := range []byte("pool-1-thread-1") {
		c[i] = int8(b)
	}
	if s := probes.CommString(c); s != "pool-1-thread-1" {
		t.Errorf("CommString = %q", s)
	}
	if s := probes.CommString([16]int8{'a', 0, 'b'}); s != "a" {
		t.Errorf("CommString stops at the first NUL: %q", s)
	}
}
