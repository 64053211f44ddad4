package measure

import (
	"fmt"
	"sort"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// A network probe's part joins its evidence into the network run's
// itself: it registers, beside its code, what it adds to the run's
// sections and what the run says when a recipe leaves it out
// (registerNetJoin), and NetParts holds it by its spec's name. Adding a
// network probe then changes no line of NetParts or Assemble.

// netStage is when a part's join runs. The interface's counters build
// the queue, drop and socket sections first; the parts at
// netOnCounters add to them (the drop probe's reasons, the socket
// probe's reads), before the sockets' timeline and the workload
// attribution read them; the parts at netAbove add a layer over the
// complete sections (the TCP layer, which reads the lock waits and the
// drop probe).
type netStage int

const (
	netOnCounters netStage = iota
	netAbove
)

// netJoin is one network run's evidence while Assemble builds it.
type netJoin struct {
	window time.Duration
	ev     *evidence.NetEvidence
	parts  *NetParts
	// socketReads are the datagrams read per socket and tick, for the
	// sockets' timeline; nil without a part that reads them.
	socketReads []socketReadTick
}

// netJoinSpec is how one network part joins the run: join adds the
// part's evidence; absent, when the recipe left the part out, says so in
// the sections it would have filled.
type netJoinSpec struct {
	name   string
	stage  netStage
	join   func(j *netJoin, p Part)
	absent func(j *netJoin)
}

// netJoins are the registered joins, by stage and then name: the order
// the parts open in and join.
var netJoins []netJoinSpec

// registerNetJoin registers the join of the network part named s.name
// (its spec's name), from the part's init.
func registerNetJoin(s netJoinSpec) {
	for _, o := range netJoins {
		if o.name == s.name {
			panic(fmt.Sprintf("measure: two network joins for part %s", s.name))
		}
	}
	netJoins = append(netJoins, s)
	sort.SliceStable(netJoins, func(i, k int) bool {
		if netJoins[i].stage != netJoins[k].stage {
			return netJoins[i].stage < netJoins[k].stage
		}
		return netJoins[i].name < netJoins[k].name
	})
}

// add puts a network probe's part into the run, under its spec's name.
func (n *NetParts) add(name string, p Part) {
	if n.joined == nil {
		n.joined = map[string]Part{}
	}
	n.joined[name] = p
}

// Part is the network probe's part named name (its spec's name), nil
// when the run does not have it.
func (n *NetParts) Part(name string) Part { return n.joined[name] }

// joinedParts are the network probes' parts in join order.
func (n *NetParts) joinedParts() []Part {
	var out []Part
	for _, s := range netJoins {
		if p, ok := n.joined[s.name]; ok {
			out = append(out, p)
		}
	}
	return out
}

// joinStage runs the joins of one stage: each part's, or its absence's.
func (j *netJoin) joinStage(stage netStage) {
	for _, s := range netJoins {
		if s.stage != stage {
			continue
		}
		if p, ok := j.parts.joined[s.name]; ok {
			s.join(j, p)
		} else if s.absent != nil {
			s.absent(j)
		}
	}
}
