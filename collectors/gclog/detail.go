package gclog

import (
	"bytes"
	"time"
)

// Detail the JVM logs beside its collections: safepoints (every stop of
// the application, GC or not), tenuring age tables, per-phase times.

// SafepointSource says which line a safepoint came from: a log with both
// "Total time for which application threads were stopped" lines and
// -XX:+PrintSafepointStatistics tables reports each stop twice.
type SafepointSource uint8

const (
	// FromStoppedLine: "Total time for which application threads were
	// stopped: X seconds, Stopping threads took: Y seconds" (JDK 7–16).
	FromStoppedLine SafepointSource = iota
	// FromSafepointLine: JDK 17+ `Safepoint "Op", Time since last: ...,
	// Reaching safepoint: N ns, ..., Total: N ns`.
	FromSafepointLine
	// FromStatistics: a -XX:+PrintSafepointStatistics row (JDK 6–8).
	FromStatistics
)

// Safepoint is one stop of the application's threads.
type Safepoint struct {
	Source SafepointSource
	// Name is the VM operation ("G1CollectForAllocation", "RevokeBias"),
	// empty when the log does not say.
	Name string
	// Stopped is how long the threads were stopped; TTSP how long it took
	// to stop them all (-1 when not logged).
	Stopped, TTSP time.Duration
	Uptime        float64
	Wall          time.Time
}

var (
	pfxEntering = []byte("Entering safepoint region: ")
	pfxLeaving  = []byte("Leaving safepoint region")
	pfxTTSP     = []byte("Stopping threads took: ")
	pfxReaching = []byte("Reaching safepoint: ")
	pfxAge      = []byte("- age ")
	pfxAgeTable = []byte("Age table with threshold")
)

// safepointName remembers the operation of "Entering safepoint region:
// RedefineClasses" for the "Total time ... stopped" line that follows.
func (p *Parser) safepointName(b []byte) {
	p.spName = p.str(bytes.TrimSpace(b))
}

// stopped reads "0.0099559 seconds, Stopping threads took: 0.0000384
// seconds".
func (p *Parser) stopped(b []byte, up float64, wall time.Time) {
	v, n := number(b)
	if n == 0 {
		return
	}
	sp := Safepoint{Source: FromStoppedLine, Name: p.spName, Stopped: seconds(v), TTSP: -1, Uptime: up, Wall: wall}
	p.spName = ""
	if k := bytes.Index(b, pfxTTSP); k >= 0 {
		if t, m := number(b[k+len(pfxTTSP):]); m > 0 {
			sp.TTSP = seconds(t)
		}
	}
	p.safepoint(&sp)
}

// unifiedSafepoint reads JDK 17+'s `Safepoint "G1CollectForAllocation",
// Time since last: 1309318907 ns, Reaching safepoint: 65058 ns, Cleanup:
// 52720 ns, At safepoint: 40827 ns, Total: 105885 ns`.
func (p *Parser) unifiedSafepoint(msg []byte, up float64, wall time.Time) {
	sp := Safepoint{Source: FromSafepointLine, Stopped: -1, TTSP: -1, Uptime: up, Wall: wall}
	name := msg[len(pfxSafepoint):]
	if k := bytes.IndexByte(name, '"'); k >= 0 {
		sp.Name = p.str(name[:k])
	}
	if k := bytes.LastIndex(msg, []byte("Total: ")); k >= 0 {
		if v, n := number(msg[k+7:]); n > 0 {
			sp.Stopped = time.Duration(v)
		}
	}
	if k := bytes.Index(msg, pfxReaching); k >= 0 {
		if v, n := number(msg[k+len(pfxReaching):]); n > 0 {
			sp.TTSP = time.Duration(v)
		}
	}
	if sp.Stopped >= 0 {
		p.safepoint(&sp)
	}
}

func (p *Parser) safepoint(sp *Safepoint) {
	p.Stats.Safepoints++
	if p.OnSafepoint != nil {
		p.OnSafepoint(sp)
	}
}

// safepointStatistics reads a -XX:+PrintSafepointStatistics row:
//
//	0.167: ParallelGCFailedAllocation       [       9          0              0    ]      [     0     0     0     0     8    ]  0
//
// (uptime: operation [threads: total initially_running wait_to_block]
// [time: spin block sync cleanup vmop] page_trap_count, times in ms) and
// its header; false when b is neither. Their brackets are not records.
func (p *Parser) safepointStatistics(b []byte) bool {
	t := bytes.TrimLeft(b, " ")
	if bytes.HasPrefix(t, []byte("vmop ")) {
		return true // the header
	}
	up, n := number(t)
	if n == 0 || n+2 >= len(t) || t[n] != ':' || t[n+1] != ' ' || t[n+2] < 'A' || t[n+2] > 'Z' {
		return false // records go on with "[GC"
	}
	r := t[n+2:]
	nameEnd := bytes.IndexAny(r, " [")
	if nameEnd <= 0 || bytes.IndexByte(r, '[') < 0 {
		return false
	}
	name := r[:nameEnd]
	r = bytes.TrimLeft(r[nameEnd:], " ")
	threads, ok := bracketNumbers(r, 3)
	if !ok {
		return false
	}
	_ = threads
	r = bytes.TrimLeft(r[bytes.IndexByte(r, ']')+1:], " ")
	ms, ok := bracketNumbers(r, 5)
	if !ok {
		return false
	}
	// spin, block, sync, cleanup, vmop: sync is the time to reach the
	// safepoint; the threads stay stopped through cleanup and the
	// operation.
	sp := Safepoint{Source: FromStatistics, Name: p.str(name), Uptime: up,
		TTSP: millis(ms[2]), Stopped: millis(ms[2] + ms[3] + ms[4])}
	p.safepoint(&sp)
	return true
}

func millis(v float64) time.Duration { return seconds(v / 1e3) }

// bracketNumbers reads "[ a b c ]" with want numbers at the start of b.
func bracketNumbers(b []byte, want int) ([]float64, bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, false
	}
	end := bytes.IndexByte(b, ']')
	if end < 0 {
		return nil, false
	}
	var out [8]float64
	n := 0
	for _, f := range bytes.Fields(b[1:end]) {
		v, k := number(f)
		if k != len(f) || n == len(out) {
			return nil, false
		}
		out[n] = v
		n++
	}
	return out[:n], n == want
}

// AgeTable is one young collection's tenuring distribution
// (-XX:+PrintTenuringDistribution, -Xlog:gc+age=trace).
type AgeTable struct {
	// DesiredSurvivor is the survivor occupancy the JVM aims at; Threshold
	// the age at which objects are promoted next, Max its configured
	// maximum.
	DesiredSurvivor int64
	Threshold, Max  int
	// Bytes[a-1] is the bytes of age a; Ages how many ages were logged.
	Bytes [16]int64
	Ages  int
	// Total is the last "total" logged: all surviving bytes.
	Total int64
}

// desiredSurvivor reads "Desired survivor size 4194304 bytes, new
// threshold 7 (max 15)" (JDK 8) or "... (max threshold 15)" (unified): a
// new age table starts.
func (p *Parser) desiredSurvivor(msg []byte) {
	p.flushAges()
	a := &p.age
	*a = AgeTable{}
	p.hasAge = true
	k := len(pfxDesired)
	if v, n := number(bytes.TrimLeft(msg[k:], " ")); n > 0 {
		a.DesiredSurvivor = int64(v)
	}
	k = bytes.Index(msg, []byte("new threshold "))
	if k < 0 {
		return
	}
	t, n := number(msg[k+14:])
	if n == 0 {
		return
	}
	a.Threshold = int(t)
	if m := bytes.Index(msg[k:], []byte("(max ")); m >= 0 {
		rest := bytes.TrimPrefix(msg[k+m+5:], []byte("threshold "))
		mx, _ := number(rest)
		a.Max = int(mx)
	}
}

// ageLine reads "- age   1:   10091512 bytes,   10091512 total".
func (p *Parser) ageLine(b []byte) {
	if !p.hasAge {
		return
	}
	r := bytes.TrimLeft(b[len(pfxAge):], " ")
	age, n := number(r)
	if n == 0 || n >= len(r) || r[n] != ':' {
		return
	}
	r = bytes.TrimLeft(r[n+1:], " ")
	v, m := number(r)
	if m == 0 {
		return
	}
	a := &p.age
	if i := int(age) - 1; i >= 0 && i < len(a.Bytes) {
		a.Bytes[i] = int64(v)
		a.Ages = max(a.Ages, i+1)
	}
	if k := bytes.Index(r, []byte("bytes,")); k >= 0 {
		if t, n := number(bytes.TrimLeft(r[k+6:], " ")); n > 0 {
			a.Total = int64(t)
		}
	}
}

func (p *Parser) flushAges() {
	if p.hasAge {
		p.hasAge = false
		if p.OnAgeTable != nil {
			p.OnAgeTable(&p.age)
		}
	}
}

// phase reports a logged pause phase's time.
func (p *Parser) phase(name []byte, d time.Duration) {
	if p.OnPhase != nil {
		p.OnPhase(p.str(bytes.TrimRight(name, " :")), d)
	}
}
