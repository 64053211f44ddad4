package serve

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gatherBounded is the family's exposition: value by label key.
func gatherBounded(t *testing.T, f *boundedFamily) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 4096)
	f.collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, l := range d.Label {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
		out[strings.Join(parts, ",")] = d.Counter.GetValue()
	}
	return out
}

func newPodDrops(n int) *boundedFamily {
	return newBoundedFamily("perfscope_test_drops_total", "test", n,
		[]string{"reason", "port", "namespace", "pod", "container"}, []string{"namespace", "pod", "container"})
}

func pod(i int) []string {
	return []string{fmt.Sprintf("ns-%d", i%7), fmt.Sprintf("pod-%03d", i), "app"}
}

// A node with 300 pods: the 20 with the most drops keep their series, the
// 280 others are one "other" series holding the rest, and nothing is lost.
func TestBoundAt300Pods(t *testing.T) {
	f := newPodDrops(0)
	total := 0.0
	for i := 0; i < 300; i++ {
		v := float64(i + 1)
		f.add(v, append([]string{"SOCKET_RCVBUFF", "9000"}, pod(i)...)...)
		total += v
	}
	// A host process's drops are never bounded.
	f.add(5, "SOCKET_RCVBUFF", "53", "", "", "")
	total += 5
	f.endWindow()
	got := gatherBounded(t, f)
	if len(got) != DefaultTopN+2 {
		t.Fatalf("%d series, want %d pods + other + host", len(got), DefaultTopN)
	}
	sum := 0.0
	for _, v := range got {
		sum += v
	}
	if sum != total {
		t.Errorf("series sum %v, want %v", sum, total)
	}
	for i := 280; i < 300; i++ {
		p := pod(i)
		key := fmt.Sprintf("container=%s,namespace=%s,pod=%s,port=9000,reason=SOCKET_RCVBUFF", p[2], p[0], p[1])
		if got[key] != float64(i+1) {
			t.Errorf("%s: %v, want %d", key, got[key], i+1)
		}
	}
	if other := got["container=other,namespace=other,pod=other,port=9000,reason=SOCKET_RCVBUFF"]; other != 280*281/2 {
		t.Errorf("other %v, want %d", other, 280*281/2)
	}
	if got["container=,namespace=,pod=,port=53,reason=SOCKET_RCVBUFF"] != 5 {
		t.Errorf("host series: %v", got)
	}
}

// Window after window with churning pods (new ones, random values): at
// most 2N+1 workload series per label set of the other labels, every
// series a counter (never decreasing while exposed), and each window's
// values all accounted for.
func TestBoundUnderChurn(t *testing.T) {
	const n = 20
	f := newPodDrops(n)
	rng := rand.New(rand.NewPCG(1, 2))
	prev := map[string]float64{}
	exposedSum := 0.0
	for w := 0; w < 40; w++ {
		added := 0.0
		for i := 0; i < 300; i++ {
			id := w*50 + i // 50 new pods per window, 250 carried over
			v := float64(rng.IntN(1000) + 1)
			f.add(v, append([]string{"SOCKET_RCVBUFF", "9000"}, pod(id)...)...)
			added += v
		}
		f.endWindow()
		got := gatherBounded(t, f)
		if len(got) > 2*n+1 {
			t.Fatalf("window %d: %d series, want at most %d", w, len(got), 2*n+1)
		}
		sum, dropped := 0.0, 0.0
		for k, v := range got {
			if v < prev[k] {
				t.Errorf("window %d: %s went down %v → %v", w, k, prev[k], v)
			}
			sum += v
		}
		for k, v := range prev {
			if _, ok := got[k]; !ok {
				dropped += v
			}
		}
		// What the exposition gained is what was added, less the series
		// dropped (stale in Prometheus, their history kept).
		if d := sum - (exposedSum - dropped); d < added-1e-6 || d > added+1e-6 {
			t.Errorf("window %d: the exposition grew by %v, %v was added", w, d, added)
		}
		exposedSum, prev = sum, got
	}
}

// A pod around rank N keeps its series while it drops out for a few
// windows (no flapping), and loses it after holdWindows out of the top.
func TestBoundHoldsNearTheEdge(t *testing.T) {
	f := newPodDrops(2)
	edge := []string{"SOCKET_RCVBUFF", "9000", "shop", "edge", "app"}
	key := "container=app,namespace=shop,pod=edge,port=9000,reason=SOCKET_RCVBUFF"
	window := func(edgeValue float64) map[string]float64 {
		f.add(100, "SOCKET_RCVBUFF", "9000", "shop", "a", "app")
		f.add(50, "SOCKET_RCVBUFF", "9000", "shop", "b", "app")
		f.add(edgeValue, edge...)
		f.endWindow()
		return gatherBounded(t, f)
	}
	if got := window(60); got[key] != 60 {
		t.Fatalf("edge in the top 2: %v", got)
	}
	for i := 0; i < holdWindows; i++ {
		got := window(10)
		if v, ok := got[key]; !ok || v != 60 {
			t.Fatalf("window %d out of the top: edge series %v %v, want held at 60", i+1, v, ok)
		}
	}
	if got := window(10); len(got) != 3 {
		t.Errorf("after %d windows out of the top the edge series is still exposed: %v", holdWindows+1, got)
	}
	if got := window(70); got[key] != 70 {
		t.Errorf("back in the top: %v", got)
	}
}

// --top-workloads reaches the served recipe's options (it was checked and
// then dropped: every run kept the default).
func TestFlagsKeepTopWorkloads(t *testing.T) {
	o, err := Flags{Recipe: "udp-rx", Listen: DefaultListen, Interval: time.Second, TopWorkloads: 7}.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.TopWorkloads != 7 {
		t.Errorf("TopWorkloads %d, want the flag's 7", o.TopWorkloads)
	}
}
