package cpuprofile

import (
	"os"
	"testing"

	"github.com/perfscope/perfscope/collectors/symbols"
)

// Stacks recorded on the project's VM (kernel 6.18) while RPS sent a UDP
// flood's receive work to an idle CPU: the idle loop, NET_RX run from the
// IPI's irq_exit, and a softirq run from the idle loop's own call-function
// flush.
func TestSplitIdleKeepsInterruptsOnIdle(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/proc", 0o755); err != nil {
		t.Fatal(err)
	}
	kallsyms := `ffffffff81000000 T do_idle
ffffffff81000100 T default_idle
ffffffff81000200 T pv_native_safe_halt
ffffffff81000300 T asm_sysvec_call_function_single
ffffffff81000400 T __irq_exit_rcu
ffffffff81000500 T handle_softirqs
ffffffff81000600 T net_rx_action
ffffffff81000700 T flush_smp_call_function_queue
ffffffff81000800 T do_softirq.part.0
ffffffff81000900 T udp_rcv
`
	if err := os.WriteFile(dir+"/proc/kallsyms", []byte(kallsyms), 0o644); err != nil {
		t.Fatal(err)
	}
	sym := symbols.New(symbols.FS{Root: dir})
	loop := []uint64{0xffffffff81000210, 0xffffffff81000110, 0xffffffff81000010}
	netRX := []uint64{0xffffffff81000910, 0xffffffff81000610, 0xffffffff81000510, 0xffffffff81000410, 0xffffffff81000310, 0xffffffff81000210, 0xffffffff81000110, 0xffffffff81000010}
	flush := []uint64{0xffffffff81000510, 0xffffffff81000810, 0xffffffff81000710, 0xffffffff81000010}
	p := Profile{Samples: []Sample{
		{TID: 0, CPU: 0, KernelStack: loop, Count: 900},
		{TID: 0, CPU: 0, KernelStack: netRX, Count: 120},
		{TID: 0, CPU: 1, KernelStack: flush, Count: 6},
		{TID: 0, CPU: 1, Count: 3}, // no kernel stack: cannot be classified
		{PID: 42, TID: 42, CPU: 1, KernelStack: netRX, Count: 50},
	}}
	kept, split := p.SplitIdle(sym)
	if got := kept.Total(); got != 120+6+50 {
		t.Errorf("kept %d samples, want 176: %+v", got, kept.Samples)
	}
	if split.InterruptByCPU[0] != 120 || split.InterruptByCPU[1] != 6 || split.Interrupt() != 126 {
		t.Errorf("interrupt-on-idle = %v", split.InterruptByCPU)
	}
	if split.LoopByCPU[0] != 900 || split.LoopByCPU[1] != 3 || split.Loop() != 903 {
		t.Errorf("idle loop = %v", split.LoopByCPU)
	}
	if IsInterruptStack([]string{"do_idle_[k]", "default_idle_[k]", "pv_native_safe_halt_[k]"}) {
		t.Error("the idle loop classified as an interrupt")
	}
}
