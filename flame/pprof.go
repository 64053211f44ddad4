package flame

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/perfscope/perfscope/base/safeio"
)

// pprofSampleType is the pprof value type of p's values and the factor
// that turns them into its unit, named as Go's own profiles name them so
// that `go tool pprof` picks sensible defaults. Time is written in
// nanoseconds whatever the profile's unit, as Go's profiles and most
// pprof consumers expect (an off-CPU profile: "off-cpu"/"nanoseconds").
func pprofSampleType(p *Profile) (*profile.ValueType, int64) {
	vt, scale := &profile.ValueType{Type: "samples", Unit: "count"}, int64(1)
	switch p.Unit {
	case Nanoseconds:
		vt = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}
	case Microseconds:
		vt, scale = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, 1000
	case Bytes:
		vt = &profile.ValueType{Type: "space", Unit: "bytes"}
	}
	if p.SampleType != "" {
		vt.Type = p.SampleType
	}
	return vt, scale
}

// WritePprof writes p as a gzipped pprof protobuf: one function and one
// location per distinct frame name, one sample per distinct stack.
// Frame names are kept verbatim (with their _[k]/_[j] annotations) so that
// reading the file back gives the same stacks.
func WritePprof(w io.Writer, p *Profile) error {
	vt, scale := pprofSampleType(p)
	if scale > 1 && p.Total() > math.MaxInt64/scale {
		return fmt.Errorf("build pprof profile: %w", ErrOverflow)
	}
	period := *vt
	out := &profile.Profile{
		SampleType: []*profile.ValueType{vt},
		PeriodType: &period,
		Period:     1,
	}
	locs := make([]*profile.Location, len(p.names))
	location := func(id uint32) *profile.Location {
		if l := locs[id]; l != nil {
			return l
		}
		fn := &profile.Function{ID: uint64(len(out.Function) + 1), Name: p.names[id], SystemName: p.names[id]}
		out.Function = append(out.Function, fn)
		l := &profile.Location{ID: uint64(len(out.Location) + 1), Line: []profile.Line{{Function: fn}}}
		out.Location = append(out.Location, l)
		locs[id] = l
		return l
	}
	var path []uint32
	var walk func(n int32)
	walk = func(n int32) {
		if n != 0 {
			path = append(path, p.node(n).name)
			defer func() { path = path[:len(path)-1] }()
			if s := p.node(n).self; s > 0 {
				// pprof stacks are leaf first.
				ls := make([]*profile.Location, len(path))
				for i, id := range path {
					ls[len(path)-1-i] = location(id)
				}
				out.Sample = append(out.Sample, &profile.Sample{Location: ls, Value: []int64{s * scale}})
			}
		}
		for c := p.node(n).firstChild; c != noNode; c = p.node(c).nextSibling {
			walk(c)
		}
	}
	walk(0)
	if err := out.CheckValid(); err != nil {
		return fmt.Errorf("build pprof profile: %w", err)
	}
	return out.Write(w)
}

// ReadPprof reads a pprof protobuf (gzipped or not) into a profile, using
// the default sample type (the last one if none is marked). Inlined
// functions become their own frames with FlameGraph's "_[i]" suffix; a
// location without symbols becomes its address in hex.
func ReadPprof(r io.Reader) (*Profile, error) {
	return readPprof(r, RootFrames{})
}

// MaxPprofBytes caps a pprof input after decompression. pprof's parser
// holds the whole protobuf and its decoded form in memory, so /dev/zero or
// a gzip bomb would otherwise take the machine's memory; real CPU and
// allocation profiles are megabytes.
var MaxPprofBytes int64 = 256 << 20

// pprofExpansion is how much memory a pprof input takes per byte of its
// decompressed protobuf while it is parsed and turned into a trie: a
// 34 MB protobuf of 9.7 M frames peaked at 678 MB RSS. So an input may
// have at most MaxBytes/pprofExpansion bytes (51 MiB by default), which
// holds the parse near MaxBytes too.
const pprofExpansion = 20

// pprofLimit is the input cap: MaxPprofBytes, or less when MaxBytes says so.
func pprofLimit() int64 {
	return min(MaxPprofBytes, max(1<<20, MaxBytes/pprofExpansion&^(1<<20-1)))
}

func readPprof(r io.Reader, roots RootFrames) (*Profile, error) {
	pp, err := profile.Parse(safeio.LimitReader(r, pprofLimit(), "pprof input"))
	if err != nil {
		return nil, fmt.Errorf("parse pprof: %w", err)
	}
	return fromPprof(pp, roots)
}

// pprofOrigin reads where a sample ran from the labels profilers commonly
// attach (async-profiler and perf converters: pid, tid, thread, cpu).
func pprofOrigin(s *profile.Sample) sampleOrigin {
	o := sampleOrigin{pid: -1, tid: -1, cpu: -1}
	num := func(k string) int64 {
		if v := s.NumLabel[k]; len(v) > 0 {
			return v[0]
		}
		return -1
	}
	o.pid, o.tid, o.cpu = num("pid"), num("tid"), num("cpu")
	for _, k := range []string{"comm", "thread", "process"} {
		if v := s.Label[k]; len(v) > 0 {
			o.comm = v[0]
			break
		}
	}
	return o
}

func fromPprof(pp *profile.Profile, roots RootFrames) (*Profile, error) {
	if len(pp.SampleType) == 0 {
		return nil, fmt.Errorf("pprof profile has no sample types")
	}
	idx := len(pp.SampleType) - 1
	if pp.DefaultSampleType != "" {
		for i, st := range pp.SampleType {
			if st.Type == pp.DefaultSampleType {
				idx = i
			}
		}
	}
	unit, scale := pprofUnit(pp.SampleType[idx].Unit)
	p := New(unit)
	if t := pp.SampleType[idx].Type; t != "" && t != defaultSampleType(unit) {
		p.SampleType = t
	}
	var frames []string
	for _, s := range pp.Sample {
		frames = roots.appendRoots(frames[:0], pprofOrigin(s))
		for i := len(s.Location) - 1; i >= 0; i-- {
			frames = appendLocationFrames(frames, s.Location[i])
		}
		if idx >= len(s.Value) {
			return nil, fmt.Errorf("pprof sample has %d values, want %d", len(s.Value), len(pp.SampleType))
		}
		v := s.Value[idx]
		if v > math.MaxInt64/scale {
			return nil, ErrOverflow
		}
		p.Add(frames, v*scale)
	}
	return p, p.Err()
}

// defaultSampleType is the sample type WritePprof names a unit's values
// by when the profile names none.
func defaultSampleType(u Unit) string {
	vt, _ := pprofSampleType(&Profile{Unit: u})
	return vt.Type
}

// pprofUnit maps a pprof unit to ours, with the factor that converts it.
func pprofUnit(u string) (Unit, int64) {
	switch strings.ToLower(u) {
	case "nanoseconds", "ns":
		return Nanoseconds, 1
	case "microseconds", "us":
		return Nanoseconds, 1e3
	case "milliseconds", "ms":
		return Nanoseconds, 1e6
	case "seconds", "s":
		return Nanoseconds, 1e9
	case "bytes", "b":
		return Bytes, 1
	}
	return Samples, 1
}

// appendLocationFrames appends loc's frames root first. pprof lists a
// location's lines innermost first; all but the outermost were inlined.
func appendLocationFrames(frames []string, loc *profile.Location) []string {
	if len(loc.Line) == 0 {
		name := fmt.Sprintf("0x%x", loc.Address)
		if loc.Mapping != nil && loc.Mapping.File != "" {
			name = "[" + baseName(loc.Mapping.File) + "]"
		}
		return append(frames, name)
	}
	for i := len(loc.Line) - 1; i >= 0; i-- {
		name := "[unknown]"
		if fn := loc.Line[i].Function; fn != nil && fn.Name != "" {
			name = fn.Name
		}
		if i > 0 && !strings.HasSuffix(name, "_[i]") {
			name += "_[i]"
		}
		frames = append(frames, name)
	}
	return frames
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
