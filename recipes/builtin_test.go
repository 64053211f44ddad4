package recipes

import "testing"

func TestBuiltinsParse(t *testing.T) {
	names := BuiltinNames()
	want := []string{"cpu-profile", "gc-pressure", "go-alloc", "jvm-alloc", "jvm-net", "lock-contention", "offcpu", "softirq-balance", "tcp-rx", "udp-rx", "udp-tx"}
	if len(names) != len(want) {
		t.Fatalf("built-ins %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("built-ins %v, want %v", names, want)
		}
	}
}
