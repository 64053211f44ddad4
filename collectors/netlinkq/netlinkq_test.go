package netlinkq

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func readFixture(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		b, err := hex.DecodeString(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestParseRecordedQueues(t *testing.T) {
	for _, c := range []struct {
		fixture string
		want    string
		napi    map[uint32]int
	}{
		{"queue-get-virtio.hex", "[{1 0 rx 0} {1 0 tx 0} {4 0 rx 257} {4 0 tx 0}]", map[uint32]int{257: 0}},
		{"queue-get-veth4.hex", "[{2 0 rx 0} {2 1 rx 0} {2 2 rx 0} {2 3 rx 0} {2 0 tx 0} {2 1 tx 0} {2 2 tx 0} {2 3 tx 0} " +
			"{3 0 rx 0} {3 1 rx 0} {3 2 rx 0} {3 3 rx 0} {3 0 tx 0} {3 1 tx 0} {3 2 tx 0} {3 3 tx 0}]", map[uint32]int{}},
	} {
		qs, err := parseQueues(readFixture(t, c.fixture))
		if err != nil {
			t.Fatalf("%s: %v", c.fixture, err)
		}
		if got := fmt.Sprint(qs); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.fixture, got, c.want)
		}
		if got := QueueNAPI(qs); fmt.Sprint(got) != fmt.Sprint(c.napi) {
			t.Errorf("%s: QueueNAPI = %v, want %v", c.fixture, got, c.napi)
		}
	}
}

// napiText prints an instance as "{ifindex id irq pid}" and its settings
// where reported ("defer=2 flush=200000 suspend=0 threaded=enabled").
func napiText(ns []NAPI) string {
	var parts []string
	for _, n := range ns {
		p := fmt.Sprintf("{%d %d %d %d", n.Ifindex, n.ID, n.IRQ, n.PID)
		if n.DeferHardIRQs != nil {
			p += fmt.Sprintf(" defer=%d", *n.DeferHardIRQs)
		}
		if n.GROFlushTimeoutNs != nil {
			p += fmt.Sprintf(" flush=%d", *n.GROFlushTimeoutNs)
		}
		if n.IRQSuspendTimeoutNs != nil {
			p += fmt.Sprintf(" suspend=%d", *n.IRQSuspendTimeoutNs)
		}
		if n.Threaded != "" {
			p += " threaded=" + n.Threaded
		}
		parts = append(parts, p+"}")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestParseRecordedNAPIs(t *testing.T) {
	for fixture, want := range map[string]string{
		"napi-get-virtio.hex": "[{4 257 -1 0 defer=0 flush=0 suspend=0 threaded=disabled}]",
		"napi-get-veth4.hex":  "[{2 354 -1 0 defer=0 flush=0 suspend=0 threaded=disabled} {2 355 -1 0 defer=0 flush=0 suspend=0 threaded=disabled} {2 356 -1 0 defer=0 flush=0 suspend=0 threaded=disabled} {2 357 -1 0 defer=0 flush=0 suspend=0 threaded=disabled}]",
		// Linux 6.18, a 2-queue veth with GRO on, napi_defer_hard_irqs 2,
		// gro_flush_timeout 200000 and threaded 1 written to its sysfs.
		"napi-get-veth-threaded.hex": "[{2 1874 -1 28985 defer=2 flush=200000 suspend=0 threaded=enabled} " +
			"{2 1875 -1 28984 defer=2 flush=200000 suspend=0 threaded=enabled}]",
	} {
		ns, err := parseNAPIs(readFixture(t, fixture))
		if err != nil {
			t.Fatalf("%s: %v", fixture, err)
		}
		if got := napiText(ns); got != want {
			t.Errorf("%s: got %s, want %s", fixture, got, want)
		}
	}
}

// Linux 6.18's virtio_net in a KVM guest: one RX and one TX queue, the
// counters it fills (TX stop/wake included), nothing it does not.
func TestParseRecordedQStats(t *testing.T) {
	qs, err := parseQStats(readFixture(t, "qstats-get-virtio.hex"))
	if err != nil {
		t.Fatal(err)
	}
	want := "[{4 rx 0 map[rx-bytes:989561645 rx-packets:42172]} {4 tx 0 map[tx-bytes:3349830 tx-packets:27414 tx-stop:0 tx-wake:0]}]"
	if got := fmt.Sprint(qs); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	d := qs[0].Sub(QueueStats{Counters: map[string]uint64{"rx-packets": 42000, "rx-bytes": 990000000}})
	if fmt.Sprint(d.Counters) != "map[rx-packets:172]" {
		t.Errorf("Sub = %v (a counter that went backwards is left out)", d.Counters)
	}
}

// A "uint" attribute arrives in 8 bytes once its value needs them.
func TestParseWideCounters(t *testing.T) {
	genl := []byte{cmdQStatsGet, 1, 0, 0}
	var wide [8]byte
	binary.NativeEndian.PutUint64(wide[:], 1<<40)
	msg := append(append(append(append(append([]byte(nil), genl...), u32Attr(attrQStatsIfindex, 3)...),
		u32Attr(attrQStatsQueueType, 0)...), u32Attr(attrQStatsQueueID, 5)...), attr(12, wide[:])...)
	qs, err := parseQStats([][]byte{msg})
	if err != nil || len(qs) != 1 || qs[0].Counters["rx-alloc-fail"] != 1<<40 || qs[0].ID != 5 {
		t.Errorf("qstats = %+v, %v", qs, err)
	}
	if _, err := parseQStats([][]byte{append(append([]byte(nil), genl...), u32Attr(attrQStatsIfindex, 3)...)}); err == nil {
		t.Error("a reply without queue type and id parsed")
	}
}

// A NIC-like reply (queues with NAPI ids and an IRQ) built with the same
// encoder the client sends with.
func TestParseEncodedNICReply(t *testing.T) {
	genl := []byte{cmdQueueGet, 1, 0, 0}
	var msgs [][]byte
	for q := range 3 {
		body := append(append(append(append([]byte(nil), genl...), u32Attr(attrQueueID, uint32(q))...),
			u32Attr(attrQueueIfindex, 7)...), u32Attr(attrQueueType, 0)...)
		body = append(body, u32Attr(attrQueueNAPIID, uint32(8193+q))...)
		msgs = append(msgs, body)
	}
	// An XSK queue (type 2) is not an RX/TX queue and is skipped.
	msgs = append(msgs, append(append(append(append([]byte(nil), genl...), u32Attr(attrQueueID, 0)...),
		u32Attr(attrQueueIfindex, 7)...), u32Attr(attrQueueType, 2)...))
	qs, err := parseQueues(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(QueueNAPI(qs)); got != "map[8193:0 8194:1 8195:2]" {
		t.Errorf("QueueNAPI = %s", got)
	}
	napi := append(append(append(append([]byte(nil), genl...), u32Attr(attrNAPIID, 8193)...),
		u32Attr(attrNAPIIfindex, 7)...), u32Attr(attrNAPIIRQ, 45)...)
	ns, err := parseNAPIs([][]byte{napi})
	if err != nil || len(ns) != 1 || ns[0].IRQ != 45 || ns[0].PID != 0 {
		t.Errorf("NAPI = %+v, %v", ns, err)
	}
}

func TestParseRejectsBrokenMessages(t *testing.T) {
	good := readFixture(t, "queue-get-virtio.hex")[2]
	for name, msg := range map[string][]byte{
		"no genl header":    {1, 2},
		"attribute overrun": append([]byte{0, 0, 0, 0}, 0xff, 0x00, 0x01, 0x00),
		"only an id":        good[:4+8],
	} {
		if _, err := parseQueues([][]byte{msg}); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestRequestEncoding(t *testing.T) {
	b := request(0x1d, 0x300, 7, cmdQueueGet, u32Attr(attrQueueIfindex, 3))
	// nlmsghdr: length 28, type 0x1d, flags REQUEST|DUMP, seq 7, pid 0;
	// genlmsghdr: cmd 10, version 1; one u32 attribute (ifindex 3).
	want := "1c0000001d0001030700000000000000" + "0a010000" + "0800020003000000"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("request = %s, want %s", got, want)
	}
}

// Live: every system has lo; on kernels before 6.8 the family cannot list
// queues and says so with ErrUnavailable.
func TestLiveQueuesOfLoopback(t *testing.T) {
	qs, err := Queues(1)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("kernel lacks it: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) == 0 || qs[0].Ifindex != 1 {
		t.Errorf("lo queues = %v", qs)
	}
}
