package procfs

import (
	"strings"
	"testing"
)

// Recorded from a host with a loopback and a virtio NIC (Linux 6.8).
const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 1861024   21036    0    0    0     0          0         0  1861024   21036    0    0    0     0       0          0
  eth0: 3112395577 2241390    0 4128    0     0          0         0 96357104  703925    0    0    0     0       0          0
`

func TestParseNetDevPackets(t *testing.T) {
	n, err := parseNetDevPackets(strings.NewReader(netDev))
	if err != nil || n != 21036*2+2241390+703925 {
		t.Errorf("got %d, %v", n, err)
	}
	if _, err := parseNetDevPackets(strings.NewReader("Inter-| x\n face |y\n  lo: 1 2 3\n")); err == nil {
		t.Error("a short row was read")
	}
	if _, err := parseNetDevPackets(strings.NewReader("")); err == nil {
		t.Error("an empty file was read as zero packets")
	}
}
