package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var sink []byte

// The first collection waits for startHeap; after it the runtime's
// defaults are back.
func TestDeferFirstGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	deferFirstGC()
	for range 16 << 10 { // 16 MiB of garbage: under startHeap
		sink = make([]byte, 1<<10)
	}
	var mid runtime.MemStats
	runtime.ReadMemStats(&mid)
	if mid.NumGC != before.NumGC {
		t.Fatalf("%d collections below startHeap", mid.NumGC-before.NumGC)
	}
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d before the first collection, want off", p)
	}
	for range 2 * startHeap >> 10 { // past startHeap
		sink = make([]byte, 1<<10)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC == before.NumGC {
		t.Fatal("no collection after twice startHeap of garbage")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == 100 && debug.SetMemoryLimit(-1) > startHeap {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collecting past startHeap, want 100 and no limit", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A command's own soft limit (udp's) stays after the first collection.
func TestDeferFirstGCKeepsACommandsLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	deferFirstGC()
	const own = 40 << 20
	debug.SetMemoryLimit(own)
	for range 2 * own >> 10 {
		sink = make([]byte, 1<<10)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after collecting past the command's limit, want 100", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := debug.SetMemoryLimit(-1); l != own {
		t.Fatalf("memory limit %d after the first collection, want the command's %d", l, own)
	}
}
