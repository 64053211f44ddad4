package procfs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
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

// The kept-open counter reads the file again at every call: it follows the
// file as it changes, and one longer than its first buffer reads whole.
func TestNetDevCounterRereads(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "proc/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "proc/net/dev")
	if err := os.WriteFile(path, []byte(netDev), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := FS{Root: dir}.OpenNetDevCounter()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Packets(); err != nil || n != 21036*2+2241390+703925 {
		t.Fatalf("first read %d, %v", n, err)
	}
	// Many interfaces: more than the first 4 KiB buffer.
	var b strings.Builder
	b.WriteString(netDev)
	for i := range 100 {
		fmt.Fprintf(&b, "  veth%d: 0 1 0 0 0 0 0 0 0 2 0 0 0 0 0 0\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Packets(); err != nil || n != 21036*2+2241390+703925+300 {
		t.Fatalf("second read %d, %v", n, err)
	}
}

// On a live system the kept-open file is read again at every call: ten
// datagrams over loopback show up in the next read (sent and received:
// at least twenty packets more).
func TestNetDevCounterLive(t *testing.T) {
	c, err := Default.OpenNetDevCounter()
	if err != nil {
		t.Skip("no /proc/net/dev:", err)
	}
	defer c.Close()
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback:", err)
	}
	defer sink.Close()
	before, err := c.Packets()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialUDP("udp4", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 10 {
		if _, err := conn.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c.Packets()
	if err != nil {
		t.Fatal(err)
	}
	if after < before+20 {
		t.Fatalf("packets %d then %d after ten datagrams over loopback", before, after)
	}
}
