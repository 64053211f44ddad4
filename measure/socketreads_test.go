package measure

import (
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

func TestAddSocketReads(t *testing.T) {
	s := evidence.SocketSection{Sockets: []evidence.UDPSocket{{Inode: 7}, {Inode: 8}}}
	AddSocketReads(&s, map[uint64]uint64{7: 3000, 99: 5}, 2*time.Second)
	a, b := s.Sockets[0], s.Sockets[1]
	if a.ReceivedPkt == nil || *a.ReceivedPkt != 3000 || a.ReceivedPerS == nil || *a.ReceivedPerS != 1500 {
		t.Errorf("socket 7: %+v", a)
	}
	// A socket the probe never saw read nothing in the window: 0, not unknown.
	if b.ReceivedPkt == nil || *b.ReceivedPkt != 0 || b.ReceivedPerS == nil || *b.ReceivedPerS != 0 {
		t.Errorf("socket 8: %+v", b)
	}
}
