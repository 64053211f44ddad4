package measure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/measure/replay"
	"github.com/perfscope/perfscope/probes/cpuprofile"
)

// panickingPIDs is a profiler whose process list panics, as a bug in
// reading the kernel's map would: it runs in the part's prefetching
// goroutine, not the command's.
type panickingPIDs struct{ replay.Profile }

func (panickingPIDs) PIDs() ([]int, error) { panic("pids: index out of range [3] with length 3") }

// A panic in the profile's prefetching goroutine reaches the measurement
// as an error (the CLI prints one sentence and exits 4) instead of killing
// the process with Go's stack trace and exit status 2.
func TestProfilePrefetchPanicIsAnError(t *testing.T) {
	dir := replay.KallsymsRoot(t, "f")
	rec := replay.Recording{Method: "perf_event/perf_link"}
	src := measure.Sources{Root: procfs.FS{Root: dir}, Symbols: symbols.FS{Root: dir}, Probes: measure.With(measure.Opener{}, &cpuprofile.Spec,
		func(cpuprofile.Options) (measure.CPUProfileProbe, error) {
			return panickingPIDs{replay.Profile{Probe: replay.New("cpuprofile", []cpuprofile.Profile{{}}, rec), Freq: 99, NCPUs: 2}}, nil
		})}
	n := measure.NewNetParts(measure.NetOptions{}, 0, 99)
	// The prefetcher looks every 250 ms: a 400 ms window sees one tick.
	_, err := measure.Measure(context.Background(), src, measure.Window{Duration: 400 * time.Millisecond}, n.Profile)
	var p *gosafe.Panic
	if !errors.As(err, &p) {
		t.Fatalf("err = %v, want the prefetcher's panic as a *gosafe.Panic", err)
	}
}
