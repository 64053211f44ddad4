package netstat

import (
	"strings"
	"testing"
)

// Recorded on this project's VM (kernel 6.18), with a busier UDP line.
const sockstat = `sockets: used 15
TCP: inuse 1 orphan 0 tw 0 alloc 1 mem 155
UDP: inuse 4 mem 389
UDPLITE: inuse 0
RAW: inuse 0
FRAG: inuse 0 memory 0
`

func TestParseSockstat(t *testing.T) {
	s, err := parseSockstat(strings.NewReader(sockstat))
	if err != nil || s.InUse != 4 || s.MemPages != 389 {
		t.Errorf("%+v %v", s, err)
	}
	if _, err := parseSockstat(strings.NewReader("TCP: inuse 1\n")); err == nil {
		t.Error("no UDP line accepted")
	}
}

func TestLiveSockstat(t *testing.T) {
	if _, err := Default.UDPSockstat(); err != nil {
		t.Fatal(err)
	}
}
