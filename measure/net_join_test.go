package measure

import (
	"slices"
	"testing"

	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/spec"
)

// Every network part of the catalog but the run's frame (the queue probe
// and the counters, which every section is built on) joins its evidence
// itself, in a fixed order: the parts that add to the counters' sections
// first, the TCP layer over them last. A new network probe without its
// join fails here instead of measuring into nothing.
func TestNetJoinsCoverTheNetworkParts(t *testing.T) {
	frame := map[string]bool{netqueue.Spec.Name: true, NetCountersSpec.Name: true}
	var names []string
	for _, s := range netJoins {
		names = append(names, s.name)
		if _, ok := builders[s.name]; !ok {
			t.Errorf("part %s joins the network run but has no constructor (registerBuilder)", s.name)
		}
		if s.join == nil {
			t.Errorf("part %s registered no join", s.name)
		}
	}
	for _, p := range Catalog {
		if p.Has(spec.InputNet) && !frame[p.Name] && !slices.Contains(names, p.Name) {
			t.Errorf("network part %s has no join (registerNetJoin beside its code)", p.Name)
		}
	}
	if want := []string{udpdrop.Spec.Name, udpsock.Spec.Name, TCPSpec.Name}; !slices.Equal(names, want) {
		t.Errorf("joins in order %v, want %v", names, want)
	}
}

// A network run opens the joined parts between the frame's probes and
// the counters, in join order, and leaves out the ones it does not have.
func TestNetPartsListJoinedInOrder(t *testing.T) {
	n := &NetParts{Softirq: NewSoftirq(SoftirqOptions{}), Counters: NewNetCounters(NetCounterOptions{})}
	tcp := NewTCP(TCPOptions{Top: 1})
	drops := NewDrops(DropOptions{})
	n.add(TCPSpec.Name, tcp)
	n.add(udpdrop.Spec.Name, drops)
	got := n.List()
	want := []Part{n.Softirq, drops, tcp, n.Counters}
	if len(got) != len(want) {
		t.Fatalf("%d parts, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("part %d is %T, want %T", i, got[i], want[i])
		}
	}
	if n.Part(udpsock.Spec.Name) != nil {
		t.Error("a part the run does not have is not nil")
	}
}
