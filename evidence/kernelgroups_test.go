package evidence

import "testing"

func TestGroupShares(t *testing.T) {
	samples := []ProfileSample{
		// NET_RX CPU 0: GRO inside the receive softirq.
		{CPU: 0, Count: 10, Frames: []string{"ret_from_fork", "__do_softirq_[k]", "net_rx_action_[k]", "napi_gro_receive_[k]", "dev_gro_receive_[k]"}},
		// NET_RX CPU 0: socket-lock spinning under the UDP enqueue.
		{CPU: 0, Count: 30, Frames: []string{"__do_softirq_[k]", "udp_queue_rcv_one_skb_[k]", "__udp_enqueue_schedule_skb_[k]", "_raw_spin_lock_[k]", "queued_spin_lock_slowpath_[k]"}},
		// CPU 1: a spin lock with no qdisc or socket frame: neither lock group.
		{CPU: 1, Count: 60, Frames: []string{"main", "do_syscall_64_[k]", "_raw_spin_lock_[k]"}},
	}
	groups, total, net := GroupShares(samples, map[int]bool{0: true})
	if total != 100 || net != 40 {
		t.Fatalf("total=%d net=%d", total, net)
	}
	by := map[string]FunctionShare{}
	for _, g := range groups {
		by[g.Group] = g
	}
	if g := by["gro"]; g.Samples != 10 || g.Share != 0.25 || g.AllShare != 0.10 {
		t.Errorf("gro = %+v", g)
	}
	if g := by["socket-lock"]; g.Samples != 30 {
		t.Errorf("socket-lock = %+v", g)
	}
	if g := by["qdisc-lock"]; g.Samples != 0 {
		t.Errorf("qdisc-lock counted a spin lock outside the transmit path: %+v", g)
	}
	if !matches("audit_filter_syscall_[k]", []string{"audit_*"}) || matches("xaudit", []string{"audit_*"}) {
		t.Error("prefix matching")
	}
}

// GroupShares keeps each frame's groups in a 64-bit mask.
func TestKernelGroupsFitFrameMask(t *testing.T) {
	if len(KernelGroups) > 64 {
		t.Fatalf("%d kernel groups: GroupShares' frameGroups masks hold 64", len(KernelGroups))
	}
}
