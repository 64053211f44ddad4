package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/cpuset"
	"github.com/perfscope/perfscope/evidence"
)

func TestSocketLockContention(t *testing.T) {
	runNetCases(t, "net.socket-lock-contention", []netCase{
		{name: "one socket, 10 CPUs", want: func(t *testing.T, f *Finding) {
			// 50 s of wait over 10 s on 10 NET_RX CPUs: half their time.
			if f.Severity != Crit || f.Impact != 0.5 || f.Recommendation.Kind != KindCode {
				t.Errorf("%v %v %v", f.Severity, f.Impact, f.Recommendation.Kind)
			}
			contains(t, "evidence", f.Evidence, "50000.0 ms of wait over 10.0s on 10 NET_RX CPUs", "socket 10.0.0.1:9000 (inode 5555, pid 4242 echo)", "__udp_enqueue_schedule_skb", "980000 drops on port 9000", "one socket and no SO_REUSEPORT")
			langs := []string{f.Recommendation.Code[0].Lang, f.Recommendation.Code[1].Lang}
			if !slices.Equal(langs, []string{"c", "go"}) || !strings.Contains(f.Recommendation.Code[1].Code, "SO_REUSEPORT") {
				t.Errorf("sketches %v", f.Recommendation.Code)
			}
		}},
		{name: "already a reuseport group", silent: true, edit: func(in *NetInput) {
			in.Evidence.Sockets.Groups = []evidence.ReusePortGroup{{Local: "10.0.0.1:9000", Port: 9000, Size: 4}}
		}},
		{name: "little contention", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
		}},
		{name: "some contention on a socket that drops", edit: func(in *NetInput) {
			// 0.5 % of 10 CPUs' 10 s waiting, but the socket is saturated:
			// the 2-CPU lab's single socket looks like this.
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 5e8}
		}, want: func(t *testing.T, f *Finding) {
			if f.Severity != Warn || !strings.Contains(f.Title, "one UDP socket is the bottleneck") {
				t.Errorf("%v %q", f.Severity, f.Title)
			}
			contains(t, "evidence", f.Evidence, "980000 drops on port 9000")
		}},
		{name: "no measurable wait, but two CPUs feed the saturated socket", edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 600, cpus[1]: 400}
		}, want: func(t *testing.T, f *Finding) {
			if !strings.Contains(f.Title, "one UDP socket is the bottleneck") {
				t.Errorf("title %q", f.Title)
			}
			contains(t, "evidence", f.Evidence, "all queue into it (60.0%, 40.0% of its wakeups)")
		}},
		{name: "one CPU feeds the saturated socket, no wait", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 1000}
		}},
		{name: "some contention, no drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-wakeup": 5e8}
			in.Evidence.Drops.ByPort = nil
		}},
		{name: "locks not measured", silent: true, edit: func(in *NetInput) { in.Evidence.Locks.Unavailable = "lock tracepoints missing" }},
	})
}

func TestReuseportSteering(t *testing.T) {
	group := func(in *NetInput) {
		e := &in.Evidence
		e.Sockets.Groups = []evidence.ReusePortGroup{{Local: "10.0.0.1:9000", Port: 9000, Size: 2, Inodes: []uint64{1, 2}}}
		e.Sockets.Sockets = []evidence.UDPSocket{
			{Local: "10.0.0.1:9000", Port: 9000, Inode: 1, ReceivedPkt: u64(3_000_000)},
			{Local: "10.0.0.1:9000", Port: 9000, Inode: 2, ReceivedPkt: u64(1_000_000)},
		}
		e.Locks.ByClass = map[string]uint64{"socket-receive-queue": 2e9}
	}
	runNetCases(t, "net.reuseport-steering", []netCase{
		{name: "contention and skew remain", edit: group, want: func(t *testing.T, f *Finding) {
			contains(t, "evidence", f.Evidence, "= 2.0% of the NET_RX CPUs' time, with 2 sockets", "1.50× the group mean of 2000000")
			if !strings.Contains(f.Recommendation.Code[0].Code, "SKF_AD_CPU") || !strings.Contains(f.Recommendation.Code[1].Code, "SO_ATTACH_REUSEPORT_CBPF") {
				t.Errorf("sketches %v", f.Recommendation.Code)
			}
		}},
		{name: "balanced and quiet", silent: true, edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
		}},
		{name: "balanced and quiet, but every socket fed by two CPUs", edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 550, cpus[1]: 450}
			in.Evidence.Sockets.Sockets[1].WakeupsByCPU = map[int]uint64{cpus[0]: 300, cpus[1]: 700}
		}, want: func(t *testing.T, f *Finding) {
			contains(t, "evidence", f.Evidence, "socket inode 1 was fed by CPUs", "(55.0%, 45.0% of its wakeups)", "socket inode 2 was fed by CPUs")
		}},
		{name: "steered: one CPU per socket", silent: true, edit: func(in *NetInput) {
			group(in)
			in.Evidence.Sockets.Sockets[1].ReceivedPkt = u64(3_000_000)
			in.Evidence.Locks.ByClass = map[string]uint64{"socket-receive-queue": 1e6}
			cpus := netRXCPUs(in.Evidence).CPUs()
			in.Evidence.Sockets.Sockets[0].WakeupsByCPU = map[int]uint64{cpus[0]: 1000, cpus[1]: 3}
			in.Evidence.Sockets.Sockets[1].WakeupsByCPU = map[int]uint64{cpus[1]: 1000}
		}},
		{name: "no group", silent: true},
	})
}

func TestThreadPinning(t *testing.T) {
	runNetCases(t, "net.thread-pinning", []netCase{
		{name: "two threads on node 1", want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			want := []string{"taskset -p -c 0 4300", "taskset -p -c 1 4301", "taskset -p -c 2 4302", "taskset -p -c 3 4303"}
			if !slices.Equal(r.Apply, want) || r.Revert[3] != "taskset -p -c 0-19 4300" || !r.Changes[0].Equal(ThreadAffinityChange(4300, cpuset.Range(0, 19), cpuset.Of(0))) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "thread 4302 (echo) last ran on CPU 6, allowed 0-19", "4302→2")
			if !strings.Contains(f.Title, "2 of 4") {
				t.Errorf("title %q", f.Title)
			}
		}},
		{name: "already on NET_RX CPUs", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Sockets.Threads {
				in.Evidence.Sockets.Threads[i].LastCPU = i
			}
		}},
		{name: "pinned by the owner", silent: true, edit: func(in *NetInput) {
			for i := range in.Evidence.Sockets.Threads {
				in.Evidence.Sockets.Threads[i].AllowedCPUs = "7"
			}
		}},
		{name: "a thread pool, not receivers", silent: true, edit: func(in *NetInput) {
			for i := 0; i < 100; i++ {
				in.Evidence.Sockets.Threads = append(in.Evidence.Sockets.Threads, evidence.ThreadCPU{TID: 9000 + i, LastCPU: 6, AllowedCPUs: "0-19"})
			}
		}},
	})
}

func TestUDPRcvbuf(t *testing.T) {
	runNetCases(t, "net.udp-rcvbuf", []netCase{
		{name: "26.6% dropped", want: func(t *testing.T, f *Finding) {
			// 3.68M arrivals in 10 s on one socket: 368k/s × 10 ms × 2 KiB
			// = 7.5 MB → 8 MiB.
			r := f.Recommendation
			if f.Severity != Crit || r.Kind != KindSetting {
				t.Errorf("%v %v", f.Severity, r.Kind)
			}
			wantApply := []string{"sysctl -w net.core.rmem_max=8388608", "sysctl -w net.core.rmem_default=8388608"}
			wantRevert := []string{"sysctl -w net.core.rmem_default=212992", "sysctl -w net.core.rmem_max=212992"}
			if !slices.Equal(r.Apply, wantApply) || !slices.Equal(r.Revert, wantRevert) {
				t.Errorf("apply %q revert %q", r.Apply, r.Revert)
			}
			contains(t, "evidence", f.Evidence, "980000 receive-buffer drops and 2700000 datagrams delivered", "368000 datagrams/s per socket × 10 ms stall × 2048 B truesize = 7536640 B per socket → 8388608 B (8 MiB)")
		}},
		{name: "reuseport group shares the rate", edit: func(in *NetInput) {
			s := in.Evidence.Sockets.Sockets[0]
			s.ReceivedPkt = u64(1_350_000)
			in.Evidence.Sockets.Sockets = []evidence.UDPSocket{s, s}
		}, want: func(t *testing.T, f *Finding) {
			if !slices.Contains(f.Recommendation.Apply, "sysctl -w net.core.rmem_max=4194304") {
				t.Errorf("apply %q", f.Recommendation.Apply)
			}
		}},
		{name: "buffers already large: advice", edit: func(in *NetInput) {
			big := int64(64 << 20)
			in.Config.Core.RmemMax, in.Config.Core.RmemDefault = &big, &big
		}, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Apply) != 0 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "in a network namespace: the socket option", edit: func(in *NetInput) {
			ro := false
			in.Config.Core.RmemWritable = &ro
		}, want: func(t *testing.T, f *Finding) {
			r := f.Recommendation
			if r.Kind != KindCode || len(r.Apply) != 0 || r.Parameters["so_rcvbuf_bytes"] != 8388608 {
				t.Errorf("%+v", r)
			}
			contains(t, "evidence", f.Evidence, "read-only in this network namespace")
			contains(t, "caveats", r.Caveats, "SO_RCVBUFFORCE")
		}},
		{name: "no config: advice without revert", edit: func(in *NetInput) { in.Config = nil }, want: func(t *testing.T, f *Finding) {
			if f.Recommendation.Kind != KindAdvice || len(f.Recommendation.Revert) != 0 || len(f.Recommendation.Apply) != 2 {
				t.Errorf("%+v", f.Recommendation)
			}
		}},
		{name: "no drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops = evidence.DropSection{UDPSNMP: &evidence.UDPSNMP{UDP: evidence.UDPCounters{InDatagrams: 2_700_000}}}
		}},
		{name: "a handful of drops", silent: true, edit: func(in *NetInput) {
			in.Evidence.Drops.ByPort[0].Count = 10
		}},
		// perfscope tcp, or jvm-net with only a TCP port: the namespace's
		// UDP drops are another program's.
		{name: "a TCP run without UDP sockets", silent: true, edit: func(in *NetInput) {
			in.Evidence.TCP = &evidence.TCPEvidence{Port: in.Evidence.Port}
			in.Evidence.Sockets = evidence.SocketSection{}
			in.Evidence.Sockets.Unavailable = "UDP sockets: not listed in a TCP run"
			in.Evidence.Drops.ByPort = nil
		}},
		{name: "a TCP run with a UDP port beside it", edit: func(in *NetInput) {
			in.Evidence.TCP = &evidence.TCPEvidence{Port: 8080}
		}},
	})
}

func TestRcvbufSize(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want int64
	}{{0, 1 << 20}, {51_200, 1 << 20}, {51_201, 2 << 20}, {1e9, RcvbufMaxBytes}} {
		if got := RcvbufSize(tt.rate); got != tt.want {
			t.Errorf("RcvbufSize(%v) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}
