package lockstat

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/internal/udpflood"
	"github.com/perfscope/perfscope/probes"
)

// Two senders flooding one socket that one goroutine reads: softirqs
// enqueuing and the reader dequeuing contend on the socket's receive-queue
// and wakeup locks (seed 003's starting point). The probe must classify the
// contention and attribute it, through the lock's BTF offset and
// /proc/net/udp, to the sink's port.
func TestProbeAttributesSocketContention(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.ShowKernelPointers(t)
	testutil.LockBPF(t)
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	offsets, err := LockOffsets(kernel)
	if err != nil {
		t.Fatal(err)
	}
	ksyms, err := symbols.New(symbols.Default).KernelSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range probes.Methods {
		t.Run(string(m), func(t *testing.T) {
			beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
			p, err := Open(Options{Method: m})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			first, err := p.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			sink, err := udpflood.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			res, err := udpflood.Send(context.Background(), udpflood.Config{
				Target: sink.AddrPort(), Senders: 2, Duration: 700 * time.Millisecond, MaxPackets: 400000,
			})
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			last, err := p.Snapshot()
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			table, err := sockets.Default.UDP()
			if err != nil {
				sink.Close()
				t.Fatal(err)
			}
			port := sink.AddrPort().Port()
			var inodes = map[uint64]bool{}
			for _, s := range table.OnPort(port) {
				inodes[s.Inode] = true
			}
			owners, err := SocketOwners(sockets.Default, inodes)
			sink.Close()
			if err != nil {
				t.Fatal(err)
			}
			d := last.Sub(first)

			byClass := map[Class]uint64{}
			type site struct {
				n      uint64
				frames []string
			}
			var sites []site
			for k, w := range d.Sites {
				frames := Symbolize(d.Stacks[k.StackID], ksyms)
				byClass[Classify(frames)] += w.Count
				sites = append(sites, site{w.Count, frames})
			}
			sort.Slice(sites, func(i, j int) bool { return sites[i].n > sites[j].n })
			for i, s := range sites {
				if i < 4 {
					t.Logf("%d × %s: %s", s.n, Classify(s.frames), strings.Join(s.frames, ";"))
				}
			}
			if out := os.Getenv("PERFSCOPE_RECORD_STACKS"); out != "" {
				var b strings.Builder
				for _, s := range sites {
					b.WriteString(strings.Join(s.frames, ";") + "\n")
				}
				os.WriteFile(out, []byte(b.String()), 0o644)
			}
			t.Logf("sent %d; contention by class %v; lost %+v", res.Sent, byClass, d.Lost)
			if byClass[SocketReceiveQueue]+byClass[SocketWakeup] == 0 {
				t.Errorf("no socket receive-queue or wakeup contention classified: %v", byClass)
			}

			attr, err := NewAttributor(offsets, table, owners)
			if err != nil {
				t.Fatal(err)
			}
			var onPort uint64
			fields := map[string]uint64{}
			for addr, w := range d.Locks {
				ref, field, ok := attr.Attribute(addr)
				if !ok || ref.Port != port {
					continue
				}
				onPort += w.Count
				fields[field] += w.Count
				if !containsPID(ref.PIDs, os.Getpid()) {
					t.Errorf("socket on port %d owned by %v, want this test (%d)", port, ref.PIDs, os.Getpid())
				}
			}
			t.Logf("contention attributed to port %d: %d by lock %v", port, onPort, fields)
			if fields["sk_receive_queue.lock"]+fields["reader_queue.lock"] == 0 {
				t.Errorf("no receive-queue lock contention attributed to the sink's port %d", port)
			}
			if err := p.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
		})
	}
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}
