package golang

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// RateReading is runtime.MemProfileRate as perfscope could learn it.
type RateReading struct {
	Rate int64
	// Source: "memory", "GODEBUG", "linker" or "default" (see
	// evidence.GoSampling.RateSource).
	Source string
	Note   string
}

// ProfilingLinked says whether the binary keeps the function that reads a
// memory profile (runtime.memProfileInternal since Go 1.23, MemProfile
// before): without it the linker sets runtime.disableMemoryProfiling and
// the runtime starts with MemProfileRate 0 — no allocation is sampled
// unless the program sets the rate itself.
func (b *Binary) ProfilingLinked() bool {
	_, internal := b.Func("runtime.memProfileInternal")
	_, public := b.Func("runtime.MemProfile")
	return internal || public
}

// MemProfileRate reads the program's sampling rate: from its memory when
// the variable can be found (the symbol table, or the code that reads
// it), else from GODEBUG=memprofilerate in its environment, else what the
// runtime starts with.
func (p *Process) MemProfileRate() RateReading {
	linked := p.Binary.ProfilingLinked()
	addr, how, err := p.Binary.MemProfileRateAddr()
	if err == nil {
		v, rerr := p.ReadUint64(addr)
		if rerr == nil {
			r := RateReading{Rate: int64(v), Source: "memory", Note: "read from the running program (runtime.MemProfileRate located by the " + how + ")"}
			if v == 0 && !linked {
				r.Note += "; the program never reads a memory profile, so the linker turned the runtime's allocation sampling off"
			}
			return r
		}
		err = rerr
	}
	why := fmt.Sprintf("runtime.MemProfileRate could not be read (%v)", err)
	if !linked {
		return RateReading{Rate: 0, Source: "linker", Note: why + "; the program never reads a memory profile, so the linker turned allocation sampling off at start (unless the program sets runtime.MemProfileRate itself)"}
	}
	if v, ok := godebug(p.Env["GODEBUG"], "memprofilerate"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return RateReading{Rate: n, Source: "GODEBUG", Note: why + "; GODEBUG=memprofilerate in the environment set it at start"}
		}
	}
	return RateReading{Rate: DefaultMemProfileRate, Source: "default", Note: why + "; assumed the runtime's default of 512 KiB (a program that sets runtime.MemProfileRate itself makes every estimate wrong by the ratio)"}
}

// godebug finds key in a GODEBUG value (the last setting wins, as in the
// runtime).
func godebug(v, key string) (string, bool) {
	var out string
	found := false
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && k == key {
			out, found = val, true
		}
	}
	return out, found
}

// GCSettings reads GOGC and GOMEMLIMIT as the runtime parses them at
// start.
func GCSettings(env map[string]string, envErr string) evidence.GoGCSettings {
	s := evidence.GoGCSettings{GOGC: evidence.Int(100), GOGCSource: "default"}
	if envErr != "" {
		s.GOGCSource = "unknown"
		s.GOGC = nil
		s.Note = "the environment could not be read (" + envErr + "): GOGC and GOMEMLIMIT unknown"
		return s
	}
	notes := []string{"debug.SetGCPercent and debug.SetMemoryLimit calls in the program are not seen"}
	if v, ok := env["GOGC"]; ok {
		s.GOGCSource = "environment"
		switch n, err := strconv.ParseInt(v, 10, 64); {
		case strings.EqualFold(v, "off"):
			s.GOGC = nil
		case err == nil:
			s.GOGC = evidence.Int(n)
		default:
			// The runtime takes an unparsable GOGC as 100.
			notes = append(notes, fmt.Sprintf("GOGC=%q does not parse: the runtime uses 100", v))
		}
	}
	if v, ok := env["GOMEMLIMIT"]; ok && !strings.EqualFold(v, "off") {
		if n, err := ParseMemoryLimit(v); err == nil {
			s.MemoryLimit = evidence.Int(n)
		} else {
			notes = append(notes, fmt.Sprintf("GOMEMLIMIT=%q: %v", v, err))
		}
	}
	s.Note = strings.Join(notes, "; ")
	return s
}

// ParseMemoryLimit parses GOMEMLIMIT: a byte count with an optional
// suffix B, KiB, MiB, GiB or TiB.
func ParseMemoryLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a byte count")
	}
	return n * mult, nil
}
