// Package replay replays a network run recorded on a live machine (a
// directory of probes.json with /proc and /sys under start/ and end/):
// probes that hand back the recorded snapshots, a root whose counters
// move between a window's two readings, recorded ethtool and netlink.
// Tests of measure and recipes assemble evidence from it without root;
// shipped code never imports it.
package replay

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/ethtool"
	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/symbols"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// Recording is what a network run's probes returned, as record_test.go
// recorded it on a live machine, with what the run was asked: the
// snapshots a replay hands back in the same order.
type Recording struct {
	// How is how the recording was made, for whoever reads the fixture.
	How    string           `json:"how"`
	Iface  netdev.Interface `json:"iface"`
	Port   int              `json:"port"`
	Method string           `json:"attach_method"`

	Softirq      []softirq.Snapshot   `json:"softirq"`
	Queue        []netqueue.Snapshot  `json:"queue"`
	NoNAPI       bool                 `json:"queue_no_napi"`
	QueueMissing map[string]string    `json:"queue_missing"`
	Lock         []lockstat.Snapshot  `json:"lock"`
	Drop         []udpdrop.Snapshot   `json:"drop"`
	DropReasons  map[string]string    `json:"drop_reasons"` // "kind/reason" → the kernel's name
	Socket       []udpsock.Snapshot   `json:"socket"`
	CPUProfile   []cpuprofile.Profile `json:"cpu_profile"`
	// ProfileOptions are the options the profiler was opened with: a
	// replay stands in only for a profiler opened the same way (the idle
	// task's interrupt samples are in the recording only when
	// KeepIdleInterrupts was asked for).
	ProfileOptions *cpuprofile.Options `json:"cpu_profile_options,omitempty"`
	Frequency      int                 `json:"frequency_hz"`
	CPUs           int                 `json:"cpus"`
}

// Load reads dir's probes.json.
func Load(t *testing.T, dir string) Recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "probes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec Recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return rec
}

// Probe is a probe that hands back recorded snapshots in order.
type Probe[S any] struct {
	name    string
	snaps   []S
	next    int
	method  probes.AttachMethod
	costs   []probes.ProgramCost
	missing map[string]error
	closed  bool
}

// New is a probe replaying snaps, attached as rec says.
func New[S any](name string, snaps []S, rec Recording) *Probe[S] {
	return &Probe[S]{name: name, snaps: snaps, method: probes.AttachMethod(rec.Method), missing: map[string]error{}}
}

func (r *Probe[S]) Snapshot() (S, error) {
	var zero S
	if r.next >= len(r.snaps) {
		return zero, fmt.Errorf("%s replay: %d snapshots recorded, a %d. asked for", r.name, len(r.snaps), r.next+1)
	}
	r.next++
	return r.snaps[r.next-1], nil
}

func (r *Probe[S]) Method() probes.AttachMethod { return r.method }
func (r *Probe[S]) Costs() []probes.ProgramCost { return r.costs }
func (r *Probe[S]) Missing() map[string]error   { return r.missing }
func (r *Probe[S]) Close() error                { r.closed = true; return nil }

// Queue is a recorded queue probe.
type Queue struct {
	*Probe[netqueue.Snapshot]
	NoNAPIs bool
}

// NoNAPI says whether the recorded kernel had no NAPI tracepoints.
func (r Queue) NoNAPI() bool { return r.NoNAPIs }

// Drop is a recorded drop probe.
type Drop struct {
	*Probe[udpdrop.Snapshot]
	Reasons map[string]string
}

// ReasonName is the recorded kernel's name of a drop reason.
func (r Drop) ReasonName(kind udpdrop.Kind, reason uint32) string {
	return r.Reasons[fmt.Sprintf("%d/%d", kind, reason)]
}

// Profile is a recorded CPU profiler.
type Profile struct {
	*Probe[cpuprofile.Profile]
	Freq, NCPUs int
	// Choice is the event it says it sampled with (zero: recordings do
	// not say), and Calls what was asked of it, in order ("start",
	// "pause", "resume", "snapshot").
	Choice cpuprofile.EventChoice
	Calls  *[]string
}

func (r Profile) Start() error         { return r.call("start") }
func (r Profile) Stop() error          { return nil }
func (r Profile) Pause() error         { return r.call("pause") }
func (r Profile) Resume() error        { return r.call("resume") }
func (r Profile) PIDs() ([]int, error) { return nil, nil }

func (r Profile) Snapshot() (cpuprofile.Profile, error) {
	r.call("snapshot")
	return r.Probe.Snapshot()
}

func (r Profile) call(what string) error {
	if r.Calls != nil {
		*r.Calls = append(*r.Calls, what)
	}
	return nil
}

func (r Profile) EventChoice() cpuprofile.EventChoice { return r.Choice }

// Drain replays the next reading: a recorded continuous profile's is its
// window.
func (r Profile) Drain() (cpuprofile.Profile, error) { return r.Snapshot() }
func (r Profile) CPUs() int                          { return r.NCPUs }
func (r Profile) Frequency() int                     { return r.Freq }

// Opener hands out replays of the recording; a probe the recording lacks
// fails to open as the kernel would have made it.
func (rec Recording) Opener() measure.Opener {
	notRecorded := func(what string) error {
		return fmt.Errorf("%s: %w (not in the recording)", what, probes.ErrNotSupported)
	}
	o := measure.Opener{}
	o = measure.With(o, &softirq.Spec, func(softirq.Options) (measure.SoftirqProbe, error) {
		return New("softirq", rec.Softirq, rec), nil
	})
	o = measure.With(o, &netqueue.Spec, func(netqueue.Options) (measure.QueueProbe, error) {
		if rec.Queue == nil {
			return nil, notRecorded("queue probe")
		}
		r := New("netqueue", rec.Queue, rec)
		for hook, why := range rec.QueueMissing {
			r.missing[hook] = fmt.Errorf("%s", why)
		}
		return Queue{r, rec.NoNAPI}, nil
	})
	o = measure.With(o, &lockstat.Spec, func(lockstat.Options) (measure.LockProbe, error) {
		if rec.Lock == nil {
			return nil, notRecorded("lock probe")
		}
		return New("lockstat", rec.Lock, rec), nil
	})
	o = measure.With(o, &udpdrop.Spec, func(udpdrop.Options) (measure.DropProbe, error) {
		if rec.Drop == nil {
			return nil, notRecorded("drop probe")
		}
		return Drop{New("udpdrop", rec.Drop, rec), rec.DropReasons}, nil
	})
	o = measure.With(o, &udpsock.Spec, func(udpsock.Options) (measure.SocketProbe, error) {
		if rec.Socket == nil {
			return nil, notRecorded("socket probe")
		}
		return New("udpsock", rec.Socket, rec), nil
	})
	return measure.With(o, &cpuprofile.Spec, func(o cpuprofile.Options) (measure.CPUProfileProbe, error) {
		if rec.CPUProfile == nil {
			return nil, notRecorded("cpu profiler")
		}
		if rec.ProfileOptions != nil && *rec.ProfileOptions != o {
			return nil, fmt.Errorf("cpu profiler opened with %+v, recorded with %+v: %w", o, *rec.ProfileOptions, probes.ErrNotSupported)
		}
		return Profile{Probe: New("cpuprofile", rec.CPUProfile, rec), Freq: rec.Frequency, NCPUs: rec.CPUs}, nil
	})
}

// NoNetlink is a kernel without the netdev netlink family.
type NoNetlink struct{}

func (NoNetlink) NAPIs(int) ([]netlinkq.NAPI, error) {
	return nil, fmt.Errorf("netdev netlink family: %w", probes.ErrNotSupported)
}
func (NoNetlink) Queues(int) ([]netlinkq.Queue, error) {
	return nil, fmt.Errorf("netdev netlink family: %w", probes.ErrNotSupported)
}

// Loopback lists NAPI instances: none for a device without its own (lo).
// Loopback is netlink on an interface without NAPI instances of its own
// (lo), or with the given ones.
type Loopback struct{ NAPIList []netlinkq.NAPI }

func (l Loopback) NAPIs(int) ([]netlinkq.NAPI, error)   { return l.NAPIList, nil }
func (l Loopback) Queues(int) ([]netlinkq.Queue, error) { return nil, nil }

// QStats: loopback's driver reports no per-queue statistics.
func (l Loopback) QStats(int) ([]netlinkq.QueueStats, error) { return nil, nil }

// PhasedRoot is a /proc and /sys root that reads the fixture's start/
// directory until flip, and its end/ directory after: a symlink, so every
// collector resolves its paths at read time and the fixture's counters
// move between a window's two readings as they did when recorded.
type PhasedRoot struct {
	// Link is the root to read /proc and /sys below.
	Link       string
	start, end string
}

func NewPhasedRoot(t *testing.T, fixture string) *PhasedRoot {
	t.Helper()
	abs, err := filepath.Abs(fixture)
	if err != nil {
		t.Fatal(err)
	}
	p := &PhasedRoot{Link: filepath.Join(t.TempDir(), "root"), start: filepath.Join(abs, "start"), end: filepath.Join(abs, "end")}
	if err := os.Symlink(p.start, p.Link); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flip switches the root to the fixture's end/.
func (p *PhasedRoot) Flip(t *testing.T) {
	t.Helper()
	tmp := p.Link + ".new"
	if err := os.Symlink(p.end, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.Link); err != nil {
		t.Fatal(err)
	}
}

// Golden compares got with the file, or writes it with -update.
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if string(want) != string(got) {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
		for i := 0; i < len(wl) && i < len(gl); i++ {
			if wl[i] != gl[i] {
				t.Fatalf("%s differs at line %d:\n want %s\n  got %s\n(run with -update if the change is intended)", path, i+1, wl[i], gl[i])
			}
		}
		t.Fatalf("%s: %d lines, got %d (run with -update if the change is intended)", path, len(wl), len(gl))
	}
}

// Update rewrites the golden files of the fixture tests instead of
// comparing (go test -update).
var Update = flag.Bool("update", false, "rewrite the golden files of the fixture tests")

// Sources read a recorded fixture: the probes hand back the recorded
// snapshots, /proc and /sys are the fixture's start/ and end/
// (root.Flip switches between the window's two readings), ethtool and
// netlink are recorded too.
func Sources(t *testing.T, fixture string) (measure.Sources, Recording, *PhasedRoot) {
	t.Helper()
	rec := Load(t, fixture)
	root := NewPhasedRoot(t, fixture)
	return measure.Sources{
		Root:    procfs.FS{Root: root.Link},
		Ethtool: ethtool.Recorded{Dir: filepath.Join(fixture, "ethtool")},
		Netlink: Loopback{}, // lo: no NAPI instance of its own
		Symbols: symbols.FS{Root: root.Link},
		Probes:  rec.Opener(),
	}, rec, root
}
