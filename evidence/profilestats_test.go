package evidence

import (
	"math"
	"testing"
)

func TestWilsonInterval(t *testing.T) {
	// 6 of 780 (0.77 %): the interval reaches past 1 %.
	lo, hi := WilsonInterval(6, 780)
	if math.Abs(lo-0.00353) > 0.0002 || math.Abs(hi-0.01669) > 0.0002 {
		t.Errorf("6/780: [%.5f, %.5f]", lo, hi)
	}
	if lo, hi := WilsonInterval(0, 100); lo != 0 || hi < 0.03 || hi > 0.04 {
		t.Errorf("0/100: [%v, %v]", lo, hi)
	}
	if lo, hi := WilsonInterval(0, 0); lo != 0 || hi != 1 {
		t.Errorf("no samples: [%v, %v]", lo, hi)
	}
}

func TestProfileCPUs(t *testing.T) {
	samples := []ProfileSample{
		{CPU: 0, Frames: []string{"cpu-0", "do_idle_[k]", "handle_softirqs_[k]", "net_rx_action_[k]", "udp_rcv_[k]"}, Count: 90},
		{CPU: 0, Frames: []string{"cpu-0", "server", "recvmsg_[k]"}, Count: 10},
		{CPU: 1, Frames: []string{"cpu-1", "flood", "net_rx_action_[k]"}, Count: 40},
	}
	rows := ProfileCPUs(samples, map[int]uint64{0: 90}, map[int]uint64{0: 900, 1: 60})
	if len(rows) != 2 {
		t.Fatalf("%+v", rows)
	}
	r := rows[0]
	if r.CPU != 0 || r.Samples != 100 || r.NetRXSamples != 90 || r.IdleInterruptSamples != 90 || r.IdleLoopSamples != 900 || math.Abs(r.NetRXShare-0.09) > 1e-9 {
		t.Errorf("cpu 0: %+v", r)
	}
	if rows[1].NetRXShare != 0.4 {
		t.Errorf("cpu 1: %+v", rows[1])
	}
}
