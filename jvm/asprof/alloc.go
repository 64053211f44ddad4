package asprof

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// DefaultProfilerAllocInterval is async-profiler's own sampling interval
// when none is given (alloc=0): 512 KiB - 1.
const DefaultProfilerAllocInterval = 524287

// unbiasedWeight is what one allocation sample stands for, and the
// sample's contribution to the variance of the total.
//
// On JDK 11+ async-profiler samples through JVMTI SampledObjectAlloc: the
// JVM puts sample points on each thread's allocated bytes at exponential
// gaps of mean I (the interval), so an object of s bytes is sampled with
// probability p = 1 - exp(-s/I). async-profiler weighs a sample
// max(s, I), which is right only for s ≪ I and s ≫ I: it under-counts
// objects of a size near the interval, by s/2I for small ones (an 8 KiB
// buffer at a 32 KiB interval: -12 %) and by 37 % at s = I (measured:
// 8 KiB arrays at 32k came out at 0.876 of ThreadMXBean's count, 32 KiB
// arrays at 0.635, 64-byte objects at 0.999). Weighing each sample s/p
// (Horvitz-Thompson) is unbiased for every size; its variance is
// estimated by w(w-s) per sample.
func unbiasedWeight(size, interval float64) (w, variance float64) {
	if size <= 0 || interval <= 0 {
		return size, 0
	}
	p := -math.Expm1(-size / interval)
	w = size / p
	return w, w * (w - size)
}

// jfrAllocEvents are the event types async-profiler records allocation
// samples as.
var jfrAllocEvents = map[string]bool{
	"jdk.ObjectAllocationInNewTLAB":   true,
	"jdk.ObjectAllocationOutsideTLAB": true,
	"jdk.ObjectAllocationSample":      true,
}

// ParseAllocJFR reads async-profiler's JFR recording of an alloc session
// into collapsed stacks in the form ParseCollapsed returns ("[name tid=N]"
// first with the `threads` option, the allocated class last with _[i] or
// _[k]), each sample weighted without bias (unbiasedWeight).
// AllocParse says how to read an allocation recording.
type AllocParse struct {
	// Interval is the sampling interval the session ran with.
	Interval int64
	// Threads puts the thread frame first, as the `threads` option does.
	Threads bool
	// Since drops the samples taken before it (the sampler's settling
	// time, see jvm.DefaultSamplerSettle); zero keeps all.
	Since time.Time
	// Until drops the samples taken after it (while the stop command
	// reached the JVM, after the window's requests were counted); zero
	// keeps all.
	Until time.Time
}

// ParseAllocJFR reads a recording as AllocParse says.
func ParseAllocJFR(b []byte, o AllocParse) (*Profile, error) {
	interval, threads := o.Interval, o.Threads
	if interval <= 0 {
		interval = DefaultProfilerAllocInterval
	}
	p := &Profile{Event: Alloc, Interval: interval}
	type acc struct {
		weight, variance float64
		samples          int64
	}
	stacks := map[string]*acc{}
	var order []string
	frameNames := map[*jfrChunk]map[int64][]string{}
	since, until := int64(0), int64(0)
	if !o.Since.IsZero() {
		since = o.Since.UnixNano()
	}
	if !o.Until.IsZero() {
		until = o.Until.UnixNano()
	}
	err := parseJFR(b, jfrAllocEvents, func(e jfrEvent) error {
		c := e.chunk
		at := c.wallNanos(num(e.fields["startTime"]))
		if since != 0 && at < since {
			p.BeforeWindow++
			return nil
		}
		if until != 0 && at > until {
			p.AfterWindow++
			return nil
		}
		size := num(e.fields["allocationSize"])
		reported := num(e.fields["tlabSize"])
		if e.typeName == "jdk.ObjectAllocationSample" {
			reported = num(e.fields["weight"])
		}
		var w, v float64
		switch {
		case size > 0 && reported == max(size, interval):
			// JVMTI sampling: async-profiler's max(s, I).
			w, v = unbiasedWeight(float64(size), float64(interval))
		default:
			// TLAB-driven sampling (JDKs before 11) weighs by the
			// TLAB; its own weight is all there is.
			w = float64(reported)
			p.OtherWeighting++
		}
		p.Samples++
		p.ReportedTotal += reported
		var frames []string
		if threads {
			frames = append(frames, threadName(c, e.fields["eventThread"]))
		}
		st := c.obj(e.fields["stackTrace"])
		if st == nil {
			p.NoStack++
		} else {
			if b, _ := st["truncated"].(bool); b {
				p.Truncated++
			}
			ref, _ := e.fields["stackTrace"].(jfrRef)
			names := frameNames[c]
			if names == nil {
				names = map[int64][]string{}
				frameNames[c] = names
			}
			fs, ok := names[ref.key]
			if !ok {
				fs = javaFrames(c, st)
				names[ref.key] = fs
			}
			frames = append(frames, fs...)
		}
		suffix := "_[i]"
		if e.typeName == "jdk.ObjectAllocationOutsideTLAB" {
			suffix = "_[k]"
		}
		frames = append(frames, className(c.str(c.obj(e.fields["objectClass"])["name"]))+suffix)
		key := strings.Join(frames, ";")
		a := stacks[key]
		if a == nil {
			a = &acc{}
			stacks[key] = a
			order = append(order, key)
		}
		a.weight += w
		a.variance += v
		a.samples++
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range order {
		a := stacks[k]
		w := int64(math.Round(a.weight))
		p.Stacks = append(p.Stacks, Stack{Frames: strings.Split(k, ";"), Weight: w, Samples: a.samples, Variance: a.variance})
		p.Total += w
		p.Variance += a.variance
	}
	return p, nil
}

// threadName is the thread frame of async-profiler's `threads` option.
func threadName(c *jfrChunk, ref any) string {
	t := c.obj(ref)
	name := c.str(t["javaName"])
	if name == "" {
		name = c.str(t["osName"])
	}
	tid := num(c.resolve(t["osThreadId"]))
	if name == "" {
		return fmt.Sprintf("[tid=%d]", tid)
	}
	return fmt.Sprintf("[%s tid=%d]", name, tid)
}

// javaFrames are a JFR stack trace's frames root first, named as the
// collapsed output names them (java/util/ArrayList.grow).
func javaFrames(c *jfrChunk, st jfrObject) []string {
	raw, _ := st["frames"].([]any)
	out := make([]string, 0, len(raw))
	for i := len(raw) - 1; i >= 0; i-- {
		f := c.obj(raw[i])
		m := c.obj(f["method"])
		cls := c.str(c.obj(m["type"])["name"])
		name := c.str(m["name"])
		switch {
		case name == "" && cls == "":
			out = append(out, "[unknown]")
		case cls == "":
			out = append(out, name)
		default:
			out = append(out, cls+"."+name)
		}
	}
	return out
}

// className turns a JVM class name into the collapsed output's form:
// "[B" → "byte[]", "[Ljava/lang/String;" → "java/lang/String[]".
func className(n string) string {
	dims := 0
	for dims < len(n) && n[dims] == '[' {
		dims++
	}
	if dims == 0 {
		return n
	}
	elem := n[dims:]
	prim := map[string]string{"B": "byte", "C": "char", "D": "double", "F": "float", "I": "int", "J": "long", "S": "short", "Z": "boolean"}
	if t, ok := prim[elem]; ok {
		elem = t
	} else {
		elem = strings.TrimSuffix(strings.TrimPrefix(elem, "L"), ";")
	}
	return elem + strings.Repeat("[]", dims)
}
