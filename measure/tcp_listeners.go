package measure

// The tcp part's listener sampler: each listener's accept queue every
// SampleEvery, and its SYN queue as often as the walk it needs allows.

import (
	"context"
	"net/netip"
	"time"

	"github.com/perfscope/perfscope/collectors/tcpdiag"
)

// listenerSamples is one listener's accept queue over the window, and
// its SYN queue: the half-open connections (request sockets in SYN_RECV)
// to its address and port.
type listenerSamples struct {
	sock             tcpdiag.Socket
	last, peak       uint32
	full, seen       int
	synLast, synPeak uint32
	synFull, synSeen int
}

// sampler reads the listeners every SampleEvery until End, or until ctx
// ends (a window that never reaches End leaves no goroutine behind).
func (p *TCP) sampler(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.opts.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			p.sample()
		}
	}
}

// sample reads every listener's accept queue once, and their SYN queues
// when synDumpBudget allows.
func (p *TCP) sample() {
	start := time.Now()
	withSyn := !start.Before(p.synNext)
	states := tcpdiag.StatesOf(tcpdiag.Listen)
	if withSyn {
		states = tcpdiag.StatesOf(tcpdiag.Listen, tcpdiag.SynRecv)
	}
	var socks []tcpdiag.Socket
	var err error
	if find := p.findable; !withSyn && len(find) > 0 {
		// Between listings, each listener is looked up alone: a listing
		// walks every bucket of the listening hash, per family, which
		// under an HTTP load was half of perfscope's own CPU.
		socks, err = p.src.TCPDiag(tcpdiag.Query{Find: find, Netns: p.netnsPath})
		if err == nil && len(socks) < len(find) {
			p.findable = nil // one closed: whatever replaced it is found by a listing
		}
	} else {
		socks, err = p.diag(states)
		if err == nil {
			p.findable = findableListeners(socks)
		}
	}
	if withSyn {
		p.synNext = time.Now().Add(min(synMaxEvery, time.Duration(float64(time.Since(start))/p.synBudget)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.diagErr == nil {
			p.diagErr = err
		}
		return
	}
	p.samples++
	var listening, halfOpen []tcpdiag.Socket
	for _, s := range socks {
		if s.Listening() {
			listening = append(listening, s)
		} else {
			halfOpen = append(halfOpen, s)
		}
	}
	for _, s := range listening {
		l := p.listeners[s.Cookie]
		if l == nil {
			l = &listenerSamples{sock: s}
			p.listeners[s.Cookie] = l
		}
		l.seen++
		l.last = s.RecvQ
		if s.RecvQ > l.peak {
			l.peak = s.RecvQ
		}
		// The kernel refuses a handshake when the queue holds more than
		// the backlog (sk_acceptq_is_full).
		if s.RecvQ > s.SendQ {
			l.full++
			p.ivFull[s.Cookie]++
		}
		p.ivPeak[s.Cookie] = max(p.ivPeak[s.Cookie], s.RecvQ)
		if !withSyn {
			continue
		}
		l.synSeen++
		syn := synQueue(s, halfOpen)
		l.synLast = syn
		l.synPeak = max(l.synPeak, syn)
		// inet_csk_reqsk_queue_is_full: the SYN queue holds at most the
		// listen backlog.
		if s.SendQ > 0 && syn >= s.SendQ {
			l.synFull++
		}
	}
}

// maxFind is the most listeners looked up one by one in a sample: more
// cost more than one listing.
const maxFind = 64

// findableListeners are the listeners among socks when every one can be
// looked up alone: none shares its family, address and port with another
// (an SO_REUSEPORT group, whose lookup finds one of them), and there are
// at most maxFind. Otherwise nil: every sample lists them.
func findableListeners(socks []tcpdiag.Socket) []tcpdiag.Socket {
	type place struct {
		family uint8
		local  netip.AddrPort
	}
	seen := map[place]bool{}
	var out []tcpdiag.Socket
	for _, s := range socks {
		if !s.Listening() {
			continue
		}
		at := place{s.Family, s.Local}
		if seen[at] {
			return nil
		}
		seen[at] = true
		out = append(out, s)
	}
	if len(out) > maxFind {
		return nil
	}
	return out
}

// synQueue counts the half-open connections of listener l: request
// sockets to its port and address (any address of its family when it
// listens on the wildcard). sock_diag does not say which socket of an
// SO_REUSEPORT group holds a request, so each member counts the group's.
func synQueue(l tcpdiag.Socket, halfOpen []tcpdiag.Socket) uint32 {
	var n uint32
	for _, h := range halfOpen {
		if h.Local.Port() != l.Local.Port() || h.Family != l.Family {
			continue
		}
		if l.Local.Addr().IsUnspecified() || l.Local.Addr() == h.Local.Addr() {
			n++
		}
	}
	return n
}
