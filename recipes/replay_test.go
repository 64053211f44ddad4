package recipes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/netdev"
	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
)

// netRecording is what a network run's probes returned, as record_test.go
// recorded it on a live machine, with what the run was asked: the
// snapshots a replay hands back in the same order.
type netRecording struct {
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

func loadRecording(t *testing.T, dir string) netRecording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "probes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec netRecording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return rec
}

// replay is a probe that hands back recorded snapshots in order.
type replay[S any] struct {
	name    string
	snaps   []S
	next    int
	method  probes.AttachMethod
	costs   []probes.ProgramCost
	missing map[string]error
	closed  bool
}

func newReplay[S any](name string, snaps []S, rec netRecording) *replay[S] {
	return &replay[S]{name: name, snaps: snaps, method: probes.AttachMethod(rec.Method), missing: map[string]error{}}
}

func (r *replay[S]) Snapshot() (S, error) {
	var zero S
	if r.next >= len(r.snaps) {
		return zero, fmt.Errorf("%s replay: %d snapshots recorded, a %d. asked for", r.name, len(r.snaps), r.next+1)
	}
	r.next++
	return r.snaps[r.next-1], nil
}

func (r *replay[S]) Method() probes.AttachMethod { return r.method }
func (r *replay[S]) Costs() []probes.ProgramCost { return r.costs }
func (r *replay[S]) Missing() map[string]error   { return r.missing }
func (r *replay[S]) Close() error                { r.closed = true; return nil }

type replayQueue struct {
	*replay[netqueue.Snapshot]
	noNAPI bool
}

func (r replayQueue) NoNAPI() bool { return r.noNAPI }

type replayDrop struct {
	*replay[udpdrop.Snapshot]
	reasons map[string]string
}

func (r replayDrop) ReasonName(kind udpdrop.Kind, reason uint32) string {
	return r.reasons[fmt.Sprintf("%d/%d", kind, reason)]
}

type replayProfile struct {
	*replay[cpuprofile.Profile]
	freq, cpus int
	// choice is the event it says it sampled with (zero: recordings do
	// not say), and calls what was asked of it, in order ("start",
	// "pause", "resume", "snapshot").
	choice cpuprofile.EventChoice
	calls  *[]string
}

func (r replayProfile) Start() error         { return r.call("start") }
func (r replayProfile) Stop() error          { return nil }
func (r replayProfile) Pause() error         { return r.call("pause") }
func (r replayProfile) Resume() error        { return r.call("resume") }
func (r replayProfile) PIDs() ([]int, error) { return nil, nil }

func (r replayProfile) Snapshot() (cpuprofile.Profile, error) {
	r.call("snapshot")
	return r.replay.Snapshot()
}

func (r replayProfile) call(what string) error {
	if r.calls != nil {
		*r.calls = append(*r.calls, what)
	}
	return nil
}

func (r replayProfile) EventChoice() cpuprofile.EventChoice { return r.choice }

// Drain replays the next reading: a recorded continuous profile's is its
// window.
func (r replayProfile) Drain() (cpuprofile.Profile, error) { return r.Snapshot() }
func (r replayProfile) CPUs() int                          { return r.cpus }
func (r replayProfile) Frequency() int                     { return r.freq }

// opener hands out replays of the recording; a probe the recording lacks
// fails to open as the kernel would have made it.
func (rec netRecording) opener() Opener {
	notRecorded := func(what string) error {
		return fmt.Errorf("%s: %w (not in the recording)", what, probes.ErrNotSupported)
	}
	return Opener{
		Softirq: func(softirq.Options) (SoftirqProbe, error) {
			return newReplay("softirq", rec.Softirq, rec), nil
		},
		Queue: func(netqueue.Options) (QueueProbe, error) {
			if rec.Queue == nil {
				return nil, notRecorded("queue probe")
			}
			r := newReplay("netqueue", rec.Queue, rec)
			for hook, why := range rec.QueueMissing {
				r.missing[hook] = fmt.Errorf("%s", why)
			}
			return replayQueue{r, rec.NoNAPI}, nil
		},
		Lock: func(lockstat.Options) (LockProbe, error) {
			if rec.Lock == nil {
				return nil, notRecorded("lock probe")
			}
			return newReplay("lockstat", rec.Lock, rec), nil
		},
		Drop: func(udpdrop.Options) (DropProbe, error) {
			if rec.Drop == nil {
				return nil, notRecorded("drop probe")
			}
			return replayDrop{newReplay("udpdrop", rec.Drop, rec), rec.DropReasons}, nil
		},
		Socket: func(udpsock.Options) (SocketProbe, error) {
			if rec.Socket == nil {
				return nil, notRecorded("socket probe")
			}
			return newReplay("udpsock", rec.Socket, rec), nil
		},
		CPUProfile: func(o cpuprofile.Options) (CPUProfileProbe, error) {
			if rec.CPUProfile == nil {
				return nil, notRecorded("cpu profiler")
			}
			if rec.ProfileOptions != nil && *rec.ProfileOptions != o {
				return nil, fmt.Errorf("cpu profiler opened with %+v, recorded with %+v: %w", o, *rec.ProfileOptions, probes.ErrNotSupported)
			}
			return replayProfile{replay: newReplay("cpuprofile", rec.CPUProfile, rec), freq: rec.Frequency, cpus: rec.CPUs}, nil
		},
	}
}

// noNetlink is a kernel without the netdev netlink family.
type noNetlink struct{}

func (noNetlink) NAPIs(int) ([]netlinkq.NAPI, error) {
	return nil, fmt.Errorf("netdev netlink family: %w", probes.ErrNotSupported)
}
func (noNetlink) Queues(int) ([]netlinkq.Queue, error) {
	return nil, fmt.Errorf("netdev netlink family: %w", probes.ErrNotSupported)
}

// lsNetlink lists NAPI instances: none for a device without its own (lo).
type lsNetlink struct{ napis []netlinkq.NAPI }

func (l lsNetlink) NAPIs(int) ([]netlinkq.NAPI, error)   { return l.napis, nil }
func (l lsNetlink) Queues(int) ([]netlinkq.Queue, error) { return nil, nil }

// phasedRoot is a /proc and /sys root that reads the fixture's start/
// directory until flip, and its end/ directory after: a symlink, so every
// collector resolves its paths at read time and the fixture's counters
// move between a window's two readings as they did when recorded.
type phasedRoot struct {
	link, start, end string
}

func newPhasedRoot(t *testing.T, fixture string) *phasedRoot {
	t.Helper()
	abs, err := filepath.Abs(fixture)
	if err != nil {
		t.Fatal(err)
	}
	p := &phasedRoot{link: filepath.Join(t.TempDir(), "root"), start: filepath.Join(abs, "start"), end: filepath.Join(abs, "end")}
	if err := os.Symlink(p.start, p.link); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *phasedRoot) flip(t *testing.T) {
	t.Helper()
	tmp := p.link + ".new"
	if err := os.Symlink(p.end, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.link); err != nil {
		t.Fatal(err)
	}
}

// golden compares got with the file, or writes it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
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
