package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/jvmapp"
)

// jvm-net over TCP: the sample receiver listening with a backlog of 4, a
// full GC in the middle of the window, and 48 connections opened while
// the JVM is stopped. The kernel completes 5 handshakes into the queue
// and refuses the rest until the JVM accepts again; the timeline puts the
// overflows in the interval the JVM was stopped, they add up to the
// window's ListenOverflows, and jvm-net.overflows-during-pause quotes both.
func TestRecipeJVMNetTCP(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	jdk, err := jvmapp.FindJDK()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "perfscope-udpsink-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sink, err := jdk.StartUDPSink(context.Background(), jvmapp.UDPSinkConfig{ClassDir: dir, RcvBuf: 64 << 10, LiveObjects: 4_000_000,
		TCPBacklog: 4, JVMArgs: []string{"-XX:+UseSerialGC", "-Xms512m", "-Xmx512m"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Stop)
	tcpTarget := fmt.Sprintf("127.0.0.1:%d", sink.TCPPort)
	Perfscope(t) // built before the pause is timed, not during it
	var conns sync.WaitGroup
	t.Cleanup(conns.Wait)
	go func() {
		// The pause, well inside the window, and the connections while
		// it lasts (a collection of 4M live objects: 100–600 ms here).
		time.Sleep(3200 * time.Millisecond)
		if c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", sink.Port)); err == nil {
			c.Write([]byte("gc"))
			c.Close()
		}
		time.Sleep(30 * time.Millisecond)
		for range 48 {
			conns.Add(1)
			go func() {
				defer conns.Done()
				if c, err := net.DialTimeout("tcp", tcpTarget, 10*time.Second); err == nil {
					c.Close()
				}
			}()
		}
	}()
	r, _ := runRecipe(t, "jvm-net", "--set", fmt.Sprintf("pid=%d", sink.PID), "--set", fmt.Sprintf("tcp_port=%d", sink.TCPPort), "--set", "duration=7s")
	var d recipeData
	decodeData(t, r, &d)
	if d.Net == nil || d.Net.TCP == nil || d.JVMPauses == nil || d.Timeline == nil || d.Timeline.TCPPort != sink.TCPPort || d.Timeline.PID != sink.PID {
		t.Fatalf("sections: %s", r.Data)
	}
	var inRows, inPause uint64
	var stopped int64
	for i, row := range d.Timeline.Rows {
		t.Logf("%s overflows %v backlog drops %v opens %v queue %v/%v GCs %v stopped %v", row.End.Format("15:04:05.000"), orDash(row.ListenOverflows),
			orDash(row.TCPBacklogDrops), orDash(row.PassiveOpens), orDash(row.AcceptQueuePeak), orDash(row.AcceptBacklog), orDash(row.JVMGCs), orDash(row.JVMStoppedNs))
		if row.ListenOverflows == nil {
			t.Fatalf("row %d has no overflows", i)
		}
		inRows += *row.ListenOverflows
		s := row.StoppedNs()
		paused := s != nil && *s >= 50e6
		// A collection that spans a tick: counted in one row, its time in the next.
		if !paused && i+1 < len(d.Timeline.Rows) && row.JVMGCs != nil && *row.JVMGCs > 0 {
			if n := d.Timeline.Rows[i+1].StoppedNs(); n != nil && *n >= 50e6 {
				paused = true
			}
		}
		if paused {
			inPause += *row.ListenOverflows
			if s != nil {
				stopped = max(stopped, *s)
			}
		}
	}
	window := d.Net.TCP.Counters.Window
	if window == nil || window.ListenOverflows == 0 || inRows != window.ListenOverflows {
		t.Fatalf("overflows: rows add up to %d, the window's %+v", inRows, window)
	}
	if stopped == 0 || inPause == 0 {
		t.Fatalf("no overflow in a pause of 50 ms (stopped %v, overflows in pauses %d of %d)", time.Duration(stopped), inPause, inRows)
	}
	var f *struct {
		ID       string   `json:"id"`
		Severity string   `json:"severity"`
		Title    string   `json:"title"`
		Evidence []string `json:"evidence"`
	}
	for i := range r.Findings {
		if r.Findings[i].ID == "jvm-net.overflows-during-pause" {
			f = &r.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no jvm-net.overflows-during-pause finding: %v", findingIDs(r))
	}
	t.Logf("%s [%s] %s\n%s", f.ID, f.Severity, f.Title, strings.Join(f.Evidence, "\n"))
	want := fmt.Sprintf("accept-queue overflows on TCP port %d rose to ", sink.TCPPort)
	if !strings.HasPrefix(f.Title, want) || !strings.Contains(f.Title, fmt.Sprintf("the JVM (pid %d) was stopped for", sink.PID)) {
		t.Errorf("title %q", f.Title)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "backlog 4") {
		t.Errorf("evidence does not quote the listener's backlog of 4:\n%s", strings.Join(f.Evidence, "\n"))
	}
	onlyFamilies(t, r, "jvm-net", "tcp")
}
