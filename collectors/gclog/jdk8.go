package gclog

import (
	"bytes"
	"math"
	"time"
)

// JDK 6–8 -XX:+PrintGCDetails logs are nested brackets that span lines:
//
//	2016-04-14T22:30:09.108+0200: 1.053: [GC (Allocation Failure) 1.053: [ParNew: 218496K->25704K(245760K), 0.0145305 secs] 218496K->25704K(791936K), 0.0146984 secs] [Times: ...]
//
// and other output interleaves with them mid-record: CMS concurrent phases
// ("[CMS-concurrent-abortable-preclean: ...]" inside a ParNew record),
// PrintHeapAtGC blocks, tenuring distributions, PrintFLSStatistics, TLAB
// statistics, adaptive-size-policy decisions, class histograms. So the
// parser tracks bracket depth across lines, keeps each open node's own text
// (children excluded) in a fixed-size buffer, and acts when a node closes.
// Concurrent phases close as separate events wherever they appear. A
// record's event waits (until its "[Times: ...]", the next record or the
// end) for what follows it: G1's "[Eden: ...]" line, CPU times, the class
// histogram printed after a full GC.
//
// Output that is not brackets but contains them — heap address ranges
// "[0x..., 0x...)", class-histogram rows "[C", "[Ljava.lang.Object;" —
// is recognised first, or it would unbalance the brackets and swallow the
// records after it.

const (
	maxDepth    = 12
	maxNodeText = 4096
	// nodeHead is what stays of a node's text when it overflows: its name,
	// stamps and cause. The newest text (sizes, "secs") is kept too.
	nodeHead = 512
	// maxRecordLines bounds how long a record may stay open: a truncated
	// or corrupt log must not swallow everything after it.
	maxRecordLines = 1000
)

type node struct {
	text []byte
	// seg is where the text after the last child starts: the stamps of the
	// next child are there.
	seg int

	uptime float64
	wall   time.Time
	id     int64

	// record is set when the node opened like a GC record ("[GC", "[Full
	// GC", "[Pause "); line and first say where, for the report when it
	// does not become an event.
	record bool
	line   int64
	first  []byte
	// indent is how far the '[' stands from the line's start when only
	// spaces precede it (-1 otherwise): G1's detail nodes nest by it.
	indent int

	young, old, meta     Space
	youngName            string
	oldTimed             bool
	initialMark, remark  bool
	cmf, promotionFailed bool
	refProc              time.Duration
	// inner is a collection logged inside this record (CMS's scavenge
	// before remark): one stop with it.
	inner    Event
	hasInner bool
	// ygOccupancy: a "[YG occupancy: ...]" child closed, as CMS's remark
	// logs before the scavenge it runs.
	ygOccupancy bool
}

func (n *node) reset() {
	n.text = n.text[:0]
	n.seg = 0
	n.uptime = math.NaN()
	n.wall = time.Time{}
	n.id = -1
	n.record = false
	n.indent = -1
	n.line = 0
	n.first = n.first[:0]
	n.young, n.old, n.meta = unknownSpace, unknownSpace, unknownSpace
	n.youngName = ""
	n.oldTimed, n.initialMark, n.remark, n.cmf, n.promotionFailed = false, false, false, false, false
	n.refProc, n.hasInner, n.ygOccupancy = 0, false, false
}

// appendText adds seg to the node's text; when the buffer is full it drops
// the oldest text after the head, because a record's end ("..., 0.0146984
// secs") matters more than what interleaved before it.
func (n *node) appendText(seg []byte) {
	if len(n.text)+len(seg) > maxNodeText {
		if len(seg) > maxNodeText-nodeHead {
			seg = seg[len(seg)-(maxNodeText-nodeHead):]
		}
		head := min(len(n.text), nodeHead)
		drop := len(n.text) + len(seg) - maxNodeText
		if drop > 0 {
			copy(n.text[head:], n.text[head+drop:])
			n.text = n.text[:len(n.text)-drop]
			n.seg = max(head, n.seg-drop)
		}
	}
	n.text = append(n.text, seg...)
}

type jdk8 struct {
	depth int
	// overflow counts brackets nested deeper than maxDepth (ignored).
	overflow    int
	nodes       [maxDepth + 1]node
	heapBlock   bool
	statsBlock  bool
	recordLines int
	// pending is the last top-level record's event, waiting for what the
	// log prints after it.
	pending    Event
	hasPending bool
	// pendingSizes: the pending event is a G1 pause whose "[Eden: ...]"
	// line follows.
	pendingSizes bool
}

var (
	pfxTimes = []byte("Times: ")
	pfxEden  = []byte("Eden: ")
)

// Lines of text that JDK 6–8 writes around GC records and that carry
// nothing the analysis needs.
var jdk8Noise = [][]byte{
	[]byte("Statistics for "), []byte("-----"), []byte("Total Free Space:"),
	[]byte("Max   Chunk Size:"), []byte("Number of Blocks:"), []byte("Av.  Block  Size:"),
	[]byte("Tree      Height:"), []byte("free="), []byte("OpenJDK "), []byte("Java HotSpot"),
	[]byte("Memory: "), []byte("/proc/meminfo:"), []byte("Application time:"), []byte("TLAB: "), []byte("TLAB totals:"),
	[]byte("AdaptiveSize"), []byte("PSAdaptiveSize"), []byte("avg_survived_padded_avg"),
	[]byte("num     #instances"),
	// Shenandoah (JDK 8): free-set reports, triggers, worker counts.
	[]byte("Free: "), []byte("Trigger: "), []byte("Using "), []byte("Good progress"), []byte("Bad progress"),
	[]byte("Failed to allocate"), []byte("Cancelling "), []byte("Adaptive CSet Selection"), []byte("Collectable Garbage"),
	[]byte("Immediate Garbage"), []byte("Pacer for "), []byte("Uncommitted "),
}

// Statistics tables (Shenandoah's "GC STATISTICS", its per-cycle phase
// times) run until the next stamped or bracketed line.
var statsStart = [][]byte{
	[]byte("All times are wall-clock times"), []byte("GC STATISTICS:"), []byte("Pause Full GC (G)"),
	[]byte("Concurrent Reset "), []byte("Pause Init Mark (G)"),
}

var (
	sfxBeforeGC = []byte("Before GC:")
	sfxAfterGC  = []byte("After GC:")
	tlabMid     = []byte("TLAB: gc thread:")
	adaptiveMid = []byte("AdaptiveSizePolicy::")
)

// jdk8Line reads one line of a JDK 6–8 log: heap blocks, statistics and
// noise are passed over, the rest runs through the bracket machine.
func (p *Parser) jdk8Line(b []byte) {
	j := &p.j
	if j.heapBlock {
		if p.inHeapBlock(b) {
			return
		}
		j.heapBlock = false
	}
	if isHeapHeader(b) || string(b) == "Heap" {
		j.heapBlock = true
		return
	}
	if k := heapHeaderIndex(b); k >= 0 {
		b = b[:k]
		j.heapBlock = true
	}
	if j.statsBlock {
		if len(b) == 0 || !(isDigit(b[0]) || b[0] == '[') {
			return
		}
		j.statsBlock = false
	}
	b = bytes.TrimRight(b, " \t")
	if bytes.HasSuffix(b, sfxBeforeGC) {
		b = b[:len(b)-len(sfxBeforeGC)]
	} else if bytes.HasSuffix(b, sfxAfterGC) {
		b = b[:len(b)-len(sfxAfterGC)]
	}
	b = cutGlued(b)
	if len(b) == 0 {
		return
	}
	// Records start with a stamp (a digit) or a bracket; only other lines
	// can be noise, which keeps the prefix checks off the hot path.
	if c := b[0]; !isDigit(c) && c != '[' {
		t := bytes.TrimLeft(b, " \t")
		if len(t) > 0 && t[0] == '[' {
			goto record // G1's indented detail: "   [Parallel Time: ..."
		}
		if isJVMHeader(t) {
			p.jvmStart()
			if bytes.HasPrefix(t, []byte("CommandLine flags:")) && p.Stats.Collector == "" {
				p.Stats.Collector = collectorFromFlags(t)
			}
			return
		}
		if hasAnyPrefix(t, jdk8Noise) != nil {
			return
		}
		if hasAnyPrefix(t, statsStart) != nil {
			j.statsBlock = true
			return
		}
		if bytes.HasPrefix(t, pfxDesired) {
			p.desiredSurvivor(t)
			return
		}
		if bytes.HasPrefix(t, pfxAge) {
			p.ageLine(t)
			return
		}
	}
	if isHistogramRow(b) || isHistogramTotal(b) {
		return
	}
	// A statistics row ends in its page-trap count; records end in "]".
	if j.depth == 0 && isDigit(b[len(b)-1]) && p.safepointStatistics(b) {
		return
	}
record:
	if j.depth == 0 && bytes.IndexByte(b, '[') < 0 {
		// Stamped lines that are not records: no brackets.
		rest := skipStamps(b)
		switch {
		case bytes.HasPrefix(rest, pfxStopped):
			up, wall := math.NaN(), time.Time{}
			if len(rest) < len(b) {
				up, wall, _ = stamps(b[:len(b)-len(rest)])
				p.sawTime(up, wall)
			}
			p.stopped(rest[len(pfxStopped):], up, wall)
			return
		case bytes.HasPrefix(rest, []byte("Application time:")):
			if len(rest) < len(b) {
				up, wall, _ := stamps(b[:len(b)-len(rest)])
				p.sawTime(up, wall)
			}
			return
		case bytes.Contains(rest, []byte("GC log file ")):
			return // rotation notices
		}
	} else if j.depth > 0 {
		j.recordLines++
		if j.recordLines > maxRecordLines {
			// A record that never closes: count it and start afresh.
			j.dropOpen(p, "the record never closes (over 1000 lines)")
		}
	}
	p.brackets(b)
}

func collectorFromFlags(b []byte) string {
	switch {
	case bytes.Contains(b, []byte("+UseG1GC")):
		return "G1"
	case bytes.Contains(b, []byte("+UseConcMarkSweepGC")):
		return "CMS"
	case bytes.Contains(b, []byte("+UseParallelGC")), bytes.Contains(b, []byte("+UseParallelOldGC")):
		return "Parallel"
	case bytes.Contains(b, []byte("+UseSerialGC")):
		return "Serial"
	case bytes.Contains(b, []byte("+UseShenandoahGC")):
		return "Shenandoah"
	}
	return ""
}

func hasAnyPrefix(b []byte, ps [][]byte) []byte {
	if len(b) == 0 {
		return nil
	}
	for _, p := range ps {
		if p[0] == b[0] && bytes.HasPrefix(b, p) {
			return p
		}
	}
	return nil
}
