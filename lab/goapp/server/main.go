// Command server is perfscope's Go lab service: an HTTP server whose
// /work handler allocates a known amount per request, in one of three
// ways, and whose /truth endpoint reports the runtime's own counts
// (runtime/metrics) for tests to compare perfscope's measurement with.
//
//	plain   each request allocates -count buffers of -size bytes
//	pooled  the buffers come from a sync.Pool and go back to it
//	leaky   the buffers come from a sync.Pool and are never put back,
//	        so every Get misses and New allocates: pooled in name only
//
// It prints "listening on ADDR" once it serves. It is built by the tests
// with several Go toolchains, stripped and not, PIE and not, with and
// without cgo, so it only uses what Go 1.19 has.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

var (
	requests atomic.Int64
	// The pool's calls as the program made them, for tests to compare
	// perfscope's pool counts with.
	poolGets, poolPuts, poolNews atomic.Int64
	// sink keeps each buffer reachable past its handler so that the
	// compiler cannot put it on the stack.
	sink atomic.Value
	pool = sync.Pool{New: func() any { poolNews.Add(1); b := make([]byte, size); return &b }}
	size int
)

func work(mode string, count int) {
	for i := 0; i < count; i++ {
		switch mode {
		case "pooled":
			poolGets.Add(1)
			b := pool.Get().(*[]byte)
			touch(*b)
			poolPuts.Add(1)
			pool.Put(b)
		case "leaky":
			poolGets.Add(1)
			b := pool.Get().(*[]byte)
			touch(*b)
			sink.Store(b)
		default:
			b := make([]byte, size)
			touch(b)
			sink.Store(&b)
		}
	}
}

//go:noinline
func touch(b []byte) {
	for i := 0; i < len(b); i += 512 {
		b[i]++
	}
}

// truth is what the runtime says it did since it started.
type truth struct {
	Requests         int64  `json:"requests"`
	AllocBytes       uint64 `json:"alloc_bytes"`
	AllocObjects     uint64 `json:"alloc_objects"`
	UnflushedObjects uint64 `json:"unflushed_objects"`
	TinyAllocs       uint64 `json:"tiny_allocs"`
	GCCycles         uint64 `json:"gc_cycles"`
	GOVersion        string `json:"go_version"`
	MemProfile       int    `json:"mem_profile_rate"`
	PoolGets         int64  `json:"pool_gets"`
	PoolPuts         int64  `json:"pool_puts"`
	PoolNews         int64  `json:"pool_news"`
	PoolAddress      string `json:"pool_address"`
}

var (
	// truthMu serialises readTruth, which reuses truthSamples and
	// memStats so that it allocates nothing between its readings.
	truthMu      sync.Mutex
	truthSamples = []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/allocs:objects"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/tiny/allocs:objects"},
	}
	memStats runtime.MemStats
)

// readTruth reads runtime/metrics exactly. The runtime counts a small
// object only when the span it was allocated from leaves a P's cache:
// when the span is full, at a GC cycle's end, or when ReadMemStats stops
// the world and flushes every P's cache. Between those, the allocation
// counters lag behind what was allocated by up to a span per size class
// per P. So readTruth flushes first, and reports how far the unflushed
// counts were behind.
func readTruth() truth {
	truthMu.Lock()
	defer truthMu.Unlock()
	s := truthSamples
	metrics.Read(s)
	lagging := s[1].Value.Uint64()
	runtime.ReadMemStats(&memStats)
	metrics.Read(s)
	return truth{
		Requests:         requests.Load(),
		AllocBytes:       s[0].Value.Uint64(),
		AllocObjects:     s[1].Value.Uint64(),
		UnflushedObjects: s[1].Value.Uint64() - lagging,
		GCCycles:         s[2].Value.Uint64(),
		TinyAllocs:       s[3].Value.Uint64(),
		GOVersion:        runtime.Version(),
		MemProfile:       runtime.MemProfileRate,
		PoolGets:         poolGets.Load(),
		PoolPuts:         poolPuts.Load(),
		PoolNews:         poolNews.Load(),
		PoolAddress:      poolAddress,
	}
}

// poolAddress is the service's pool's address, as perfscope names a pool
// it cannot name by its variable (a stripped binary): set once, so that
// reading the truth allocates nothing for it.
var poolAddress = fmt.Sprintf("%p", &pool)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	mode := flag.String("mode", "plain", "plain, pooled or leaky")
	count := flag.Int("count", 4, "buffers per request")
	flag.IntVar(&size, "size", 4096, "bytes per buffer")
	rate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate to set (0: keep the runtime's)")
	pprofOn := flag.Bool("pprof", false, "serve net/http/pprof's handlers under /debug/pprof/ (not with -tags noprofile)")
	h2c := flag.Bool("h2c", false, "also serve HTTP/2 without TLS on the port (prior knowledge; Go 1.24 and later)")
	flag.Parse()
	if *rate > 0 {
		runtime.MemProfileRate = *rate
	}
	switch *mode {
	case "plain", "pooled", "leaky":
	default:
		fmt.Fprintf(os.Stderr, "unknown -mode %q\n", *mode)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		work(*mode, *count)
		requests.Add(1)
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/truth", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(readTruth())
	})
	registerProfile(mux, *pprofOn)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	if err := serve(ln, mux, *h2c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
