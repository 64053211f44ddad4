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

// cutGlued cuts TLAB statistics and adaptive-size decisions glued to a
// record's start ("[GC TLAB: gc thread: ...", "[GCAdaptiveSizePolicy::old
// generation size: ..."): they run to the end of the line. Each search is
// gated on a byte the text has and most lines lack.
func cutGlued(b []byte) []byte {
	if bytes.IndexByte(b, 'L') >= 0 {
		if k := bytes.Index(b, tlabMid); k > 0 {
			b = b[:k]
		}
	}
	if bytes.IndexByte(b, 'z') >= 0 {
		if k := bytes.Index(b, adaptiveMid); k > 0 {
			if bytes.HasSuffix(b[:k], []byte("PS")) {
				k -= 2 // "PSAdaptiveSizePolicy::"
			}
			b = b[:k]
		}
	}
	return b
}

// isJVMHeader matches the lines a JDK 6–8 JVM writes first into its GC
// log: "Java HotSpot(TM) 64-Bit Server VM (25.111-b14) for linux-amd64
// JRE ...", "OpenJDK 64-Bit Server VM (...)", "CommandLine flags: ...".
func isJVMHeader(t []byte) bool {
	switch {
	case bytes.HasPrefix(t, []byte("CommandLine flags:")):
		return true
	case bytes.HasPrefix(t, []byte("Java HotSpot")), bytes.HasPrefix(t, []byte("OpenJDK ")):
		// Not the JVM's warnings ("OpenJDK 64-Bit Server VM warning: ...").
		return !bytes.Contains(t, []byte("warning"))
	}
	return false
}

// inHeapBlock reports whether b belongs to a PrintHeapAtGC block (or the
// "Heap" summary at exit).
func (p *Parser) inHeapBlock(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0] == '}' {
		p.j.heapBlock = false
		return true
	}
	if b[0] == ' ' {
		t := bytes.TrimLeft(b, " ")
		if len(t) > 0 && t[0] != '[' && t[0] != '(' && t[0] != ',' && t[0] != ':' {
			return true
		}
	}
	if isHeapHeader(b) {
		return true
	}
	// Unindented summary lines (JDK 1.4–6 write some without indent).
	return hasAnyPrefix(b, heapWords) != nil
}

var heapWords = [][]byte{
	[]byte("PSYoungGen"), []byte("PSOldGen"), []byte("ParOldGen"), []byte("PSPermGen"), []byte("eden space"),
	[]byte("from space"), []byte("to   space"), []byte("object space"), []byte("def new generation"),
	[]byte("tenured generation"), []byte("par new generation"), []byte("concurrent mark-sweep"),
	[]byte("concurrent-mark-sweep"), []byte("compacting perm gen"), []byte("the space"), []byte("ro space"),
	[]byte("rw space"), []byte("garbage-first heap"), []byte("region size"), []byte("Metaspace"),
	[]byte("class space"), []byte("Shenandoah Heap"), []byte("No shared spaces"),
}

// isHeapHeader matches "{Heap before GC invocations=N (full M):" and
// "Heap after GC invocations=...", in either case (JDK 6/7 write "gc").
func isHeapHeader(b []byte) bool {
	if len(b) > 0 && b[0] == '{' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] != 'H' {
		return false
	}
	return hasPrefixFold(b, "Heap before GC") || hasPrefixFold(b, "Heap after GC")
}

// heapHeaderIndex finds a "{Heap before GC" glued to the end of a record's
// first line ("[GC {Heap before gc invocations=3:").
func heapHeaderIndex(b []byte) int {
	if bytes.IndexByte(b, '{') < 0 {
		return -1
	}
	for off := 0; ; {
		k := bytes.Index(b[off:], []byte("{Heap "))
		if k < 0 {
			return -1
		}
		k += off
		if isHeapHeader(b[k:]) {
			return k
		}
		off = k + 1
	}
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && bytes.EqualFold(b[:len(p)], []byte(p))
}

// isHistogramRow matches the rows of a class histogram
// (-XX:+PrintClassHistogramBefore/AfterFullGC, heap dumps):
// "   1:       2050241     4701812112  [Ljava.lang.Object;". No GC
// record has an integer, a colon, then two more integers.
func isHistogramRow(b []byte) bool {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	n := 0
	for i < len(b) && isDigit(b[i]) {
		i++
		n++
	}
	if n == 0 || i >= len(b) || b[i] != ':' {
		return false
	}
	i++
	for f := 0; f < 2; f++ {
		s := i
		for i < len(b) && b[i] == ' ' {
			i++
		}
		if i == s {
			return false
		}
		d := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == d {
			return false
		}
	}
	return i < len(b) && b[i] == ' '
}

// isHistogramTotal matches a class histogram's last line, "Total
// 44540060     7115953848".
func isHistogramTotal(b []byte) bool {
	if !bytes.HasPrefix(b, []byte("Total ")) {
		return false
	}
	r := bytes.TrimLeft(b[6:], " ")
	return len(r) > 0 && isDigit(r[0])
}

// looksLikeRecord reports whether the text after a '[' starts a GC record
// (as opposed to detail: "[GC Worker Start", "[GC concurrent-mark-start]",
// "[GC ref-proc").
func looksLikeRecord(b []byte) bool {
	switch {
	case bytes.HasPrefix(b, []byte("Full GC")), bytes.HasPrefix(b, []byte("Pause ")):
		return true
	case !bytes.HasPrefix(b, []byte("GC")):
		return false
	}
	r := b[2:]
	for _, d := range [][]byte{[]byte(" Worker"), []byte(" concurrent-"), []byte(" ref-proc")} {
		if bytes.HasPrefix(r, d) {
			return false
		}
	}
	return true
}

// brackets runs the bracket machine over one line.
func (p *Parser) brackets(b []byte) {
	j := &p.j
	startDepth := j.depth
	startLen := len(j.nodes[j.depth].text)
	opened, stray := false, false
	i := 0
	// Positions of the next '[' and ']' (len(b) when none), found with
	// IndexByte's vectorised scan rather than byte by byte.
	nextOpen, nextClose := -1, -1
	for i < len(b) {
		if nextOpen < i {
			nextOpen = indexFrom(b, i, '[')
		}
		if nextClose < i {
			nextClose = indexFrom(b, i, ']')
		}
		k := min(nextOpen, nextClose)
		if k > i && j.overflow == 0 {
			j.nodes[j.depth].appendText(b[i:k])
		}
		if k >= len(b) {
			break
		}
		if b[k] == '[' {
			rest := b[k+1:]
			// An address range "[0x00000007aaa80000, 0x...)" closes with ')'.
			if len(rest) > 1 && rest[0] == '0' && rest[1] == 'x' {
				if e := bytes.IndexAny(rest, ")]"); e >= 0 {
					i = k + 2 + e
				} else {
					i = len(b)
				}
				continue
			}
			opened = true
			if j.overflow > 0 || j.depth >= maxDepth {
				j.overflow++
				i = k + 1
				continue
			}
			// [Times: user=... sys=..., real=... secs] follows records.
			if bytes.HasPrefix(rest, pfxTimes) {
				if e := bytes.IndexByte(rest, ']'); e >= 0 {
					if j.depth == 0 {
						p.times(rest[len(pfxTimes):e])
					}
					i = k + 2 + e
					continue
				}
			}
			rec := looksLikeRecord(rest)
			parent := &j.nodes[j.depth]
			up, wall, id := stamps(parent.text[parent.seg:])
			if rec && j.depth > 0 && !j.nestsRecord() {
				// Only a CMS remark holds another record (its scavenge):
				// the open record was cut off (a truncated log, lines
				// lost) and this one starts afresh. A bare "[GC" line
				// repeated with the same stamp lost nothing.
				top := &j.nodes[1]
				if j.depth == 1 && startDepth == 1 && top.uptime == up && isBlank(top.text[min(startLen, 2):startLen]) {
					top.record = false
				}
				j.dropOpen(p, "cut off: the next record starts before it ends")
				parent = &j.nodes[0]
			}
			if rec && j.depth == 0 {
				// A new record: the previous one has nothing more coming.
				j.flushPending(p)
			}
			j.depth++
			n := &j.nodes[j.depth]
			n.reset()
			n.uptime, n.wall, n.id = up, wall, id
			if rec {
				n.record, n.line = true, p.fileLine
				n.first = append(n.first, b[:min(len(b), 200)]...)
			}
			if isBlank(b[:k]) {
				n.indent = k
			}
			i = k + 1
			continue
		}
		// ']'
		i = k + 1
		if j.overflow > 0 {
			j.overflow--
			continue
		}
		if j.depth == 0 {
			// A record's end without its start: the log (or a fragment of
			// it) begins inside a record.
			if !stray && bytes.HasSuffix(bytes.TrimRight(b[:k], " "), []byte("secs")) {
				p.unrecognised(p.fileLine, "a record's end without its start", b)
				stray = true
			}
			continue
		}
		p.closeNode(j.depth)
		j.depth--
		parent := &j.nodes[j.depth]
		parent.seg = len(parent.text)
		if j.depth == 0 {
			j.recordLines = 0
		}
	}
	if j.depth == 0 {
		n := &j.nodes[0]
		if startDepth == 0 && !opened {
			if t := bytes.TrimSpace(skipStamps(n.text)); len(t) > 0 {
				switch {
				case stray:
				case bytes.Contains(t, []byte(" secs")):
					p.unrecognised(p.fileLine, "a pause without a record around it", b)
				default:
					p.unknown(b)
				}
			}
		}
		n.text = n.text[:0]
		n.seg = 0
	} else if j.overflow == 0 {
		j.nodes[j.depth].appendText([]byte{' '})
	}
}

// nestsRecord reports whether the open top-level record may hold another
// record: a CMS remark runs its scavenge inside ("[GC (CMS Final Remark)
// [YG occupancy: ...][GC (CMS Final Remark) [ParNew: ...").
func (j *jdk8) nestsRecord() bool {
	top := &j.nodes[1]
	return !top.hasInner && (top.ygOccupancy || bytes.Contains(top.text, []byte("CMS Final Remark")))
}

// dropOpen forgets every open node, counting the records among them.
func (j *jdk8) dropOpen(p *Parser, reason string) {
	for d := 1; d <= j.depth; d++ {
		if n := &j.nodes[d]; n.record {
			p.unrecognised(n.line, reason, n.first)
		}
	}
	j.depth, j.overflow, j.recordLines = 0, 0, 0
	j.nodes[0].text = j.nodes[0].text[:0]
	j.nodes[0].seg = 0
}

// skipStamps skips "2016-04-14T22:30:09.108+0200: 1.053: #3: " prefixes.
func skipStamps(b []byte) []byte {
	for {
		b = bytes.TrimLeft(b, " ")
		if len(b) == 0 {
			return b
		}
		if _, n := dateStamp(b); n > 0 && n < len(b) && b[n] == ':' {
			b = b[n+1:]
			continue
		}
		if b[0] == '#' {
			if _, n := number(b[1:]); n > 0 && 1+n < len(b) && b[1+n] == ':' {
				b = b[n+2:]
				continue
			}
		}
		if _, n := number(b); n > 0 && n < len(b) && b[n] == ':' {
			b = b[n+1:]
			continue
		}
		return b
	}
}

// stamps finds the last date, uptime ("12.345:") and GC id ("#3:") in b,
// which is the text just before a '['.
func stamps(b []byte) (up float64, wall time.Time, id int64) {
	up, id = math.NaN(), -1
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '#' {
			if v, n := number(b[i+1:]); n > 0 && i+1+n < len(b) && b[i+1+n] == ':' {
				id = int64(v)
				i += n
			}
			continue
		}
		if !isDigit(c) || (i > 0 && (isDigit(b[i-1]) || b[i-1] == '.' || b[i-1] == ',')) {
			continue
		}
		if t, n := dateStamp(b[i:]); n > 0 {
			wall = t
			i += n - 1
			continue
		}
		// Uptimes always have a fraction ("12.345:"); GC ids and sizes do not
		// end in ':'.
		v, n := number(b[i:])
		if i+n < len(b) && b[i+n] == ':' && hasFraction(b[i:i+n]) {
			up = v
		}
		if n > 0 {
			i += n - 1
		}
	}
	return up, wall, id
}

func hasFraction(num []byte) bool {
	for _, c := range num[1:] {
		if c == '.' || c == ',' {
			return true
		}
	}
	return false
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

var (
	youngGens = [][]byte{[]byte("ParNew"), []byte("DefNew"), []byte("PSYoungGen"), []byte("ASParNew")}
	permGens  = [][]byte{[]byte("CMS Perm"), []byte("Perm"), []byte("PSPermGen"), []byte("Metaspace")}
	oldGens   = [][]byte{[]byte("Tenured"), []byte("ParOldGen"), []byte("PSOldGen"), []byte("ASCMS"), []byte("CMS")}
	refKinds  = [][]byte{[]byte("SoftReference"), []byte("WeakReference"), []byte("FinalReference"), []byte("PhantomReference"), []byte("JNI Weak Reference")}
)

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

func (p *Parser) closeNode(d int) {
	j := &p.j
	n := &j.nodes[d]
	t := bytes.TrimLeft(n.text, " ")
	var parent *node
	if d > 1 {
		parent = &j.nodes[d-1]
	}
	switch {
	case bytes.HasPrefix(t, []byte("GC concurrent-")) || bytes.HasPrefix(t, []byte("CMS-concurrent-")):
		p.jdk8Concurrent(n, t, parent)
		return
	case bytes.HasPrefix(t, pfxConcurrent):
		// JDK 8 Shenandoah: "[Concurrent marking, 3.234 ms]".
		p.shenandoah8(n, t, parent)
		return
	case bytes.HasPrefix(t, pfxPause):
		if p.shenandoah8(n, t, parent) {
			return
		}
	case isGCRecord(t):
		if !bytes.Contains(t, []byte(" sec")) {
			break // no pause time: counted below
		}
		if d == 1 {
			p.jdk8Record(n, t)
			return
		}
		// A collection inside another record: CMS's scavenge before
		// remark. The enclosing record's time includes it: one stop.
		e := p.jdk8Event(n, t)
		if parent != nil && !parent.hasInner {
			parent.inner, parent.hasInner = *e, true
		} else {
			p.j.flushPending(p)
			p.emit(e)
		}
		return
	case d == 1 && bytes.HasPrefix(t, pfxEden):
		p.g1Sizes(t)
	case d == 1 && j.hasPending && n.indent >= 0:
		// G1's pause detail: "[Parallel Time: 3.2 ms, GC Workers: 8]",
		// "[Other: 0.5 ms]" and, nested deeper, "[Ref Proc: 0.1 ms]".
		if name, dur, ok := nameMs(t); ok {
			switch {
			case bytes.Equal(name, []byte("Ref Proc")):
				j.pending.RefProc += dur
			case n.indent < 5:
				p.phase(name, dur)
			}
		}
	case d == 1 && (bytes.HasPrefix(t, []byte("Class Histogram")) || bytes.HasPrefix(t, []byte("Heap Dump"))):
		// Printed after a full GC, still inside its safepoint: the
		// application waits for it too.
		if dur, ok := secs(t); ok && j.hasPending && j.pending.Kind == KindFull {
			j.pending.Pause += dur
		}
	case parent == nil:
		// Other top-level detail ([Parallel Time: ...], [Metaspace ...]).
	case hasAnyPrefix(t, youngGens) != nil:
		parent.young, _ = transition(t)
		parent.youngName = p.str(hasAnyPrefix(t, youngGens))
		if bytes.Contains(t, []byte("promotion failed")) {
			parent.promotionFailed = true
		}
		parent.refProc += n.refProc
	case hasAnyPrefix(t, permGens) != nil:
		parent.meta, _ = transition(t)
	case bytes.HasPrefix(t, []byte("YG occupancy")):
		parent.ygOccupancy = true
	case bytes.HasPrefix(t, []byte("1 CMS-initial-mark")):
		parent.initialMark = true
	case bytes.HasPrefix(t, []byte("1 CMS-remark")):
		parent.remark = true
	case hasAnyPrefix(t, refKinds) != nil:
		if dur, ok := secs(t); ok {
			parent.refProc += dur
		}
	case bytes.HasPrefix(t, []byte("weak refs processing")):
		if dur, ok := secs(t); ok {
			parent.refProc = dur // the total of the reference kinds inside it
		}
	case hasAnyPrefix(t, oldGens) != nil:
		parent.old, _ = transition(t)
		if _, ok := secs(t); ok {
			parent.oldTimed = true
		}
		// "concurrent mode interrupted" is a System.gc() (or GC locker)
		// cutting the cycle short, not a failure: the record's cause says
		// which.
		if bytes.Contains(t, []byte("concurrent mode failure")) {
			parent.cmf = true
		}
	}
	if n.record {
		p.unrecognised(n.line, "not a GC record perfscope knows", n.first)
	}
}

func (p *Parser) jdk8Concurrent(n *node, t []byte, parent *node) {
	d, ok := secs(t)
	if !ok {
		return // "-start" markers
	}
	e := &p.ev
	e.reset()
	e.Uptime, e.Wall, e.GCID = n.uptime, n.wall, n.id
	if parent != nil && math.IsNaN(e.Uptime) {
		e.Uptime = parent.uptime
	}
	// The phase's line is written when it ends.
	e.Uptime -= d.Seconds()
	if !e.Wall.IsZero() {
		e.Wall = e.Wall.Add(-d)
	}
	e.File, e.Line = p.file, p.fileLine
	e.Kind = KindConcurrent
	e.Duration = d
	end := bytes.IndexAny(t, ":,")
	if end < 0 {
		end = len(t)
	}
	e.Name = p.str(t[:end])
	p.emit(e)
}

// shenandoah8 reads JDK 8 Shenandoah's "[Pause Final Mark (process
// weakrefs), 0.436 ms]", "[Pause Full 1589M->1002M(1690M), 4077.274 ms]"
// and "[Concurrent cleanup 84078K->26953K(98304K), 0.037 ms]": the unified
// messages in brackets. False when t is not one ("[Pause Full, start]"
// markers are consumed).
func (p *Parser) shenandoah8(n *node, t []byte, parent *node) bool {
	m := bytes.TrimRight(t, " ")
	if bytes.HasSuffix(m, []byte(", start")) {
		return true
	}
	// "…, 0.436 ms" → "… 0.436ms", the unified shape.
	var buf [maxNodeText + 8]byte
	msg := buf[:0]
	if k := bytes.LastIndex(m, []byte(", ")); k > 0 {
		msg = append(msg, m[:k]...)
		msg = append(msg, ' ')
		msg = append(msg, bytes.ReplaceAll(m[k+2:], []byte(" "), nil)...)
	} else {
		msg = append(msg, m...)
	}
	up := n.uptime
	if math.IsNaN(up) && parent != nil {
		up = parent.uptime
	}
	e := &p.ev
	if bytes.HasPrefix(msg, pfxConcurrent) {
		return p.unifiedConcurrent(e, msg, n.id, up, n.wall)
	}
	if _, _, ok := durationSuffix(msg); !ok {
		return false
	}
	p.j.flushPending(p)
	return p.unifiedPause(e, msg, n.id, up, n.wall)
}

// jdk8Event builds the event of a closed "[GC ..." or "[Full GC ..." node
// into p.ev.
func (p *Parser) jdk8Event(n *node, t []byte) *Event {
	e := &p.ev
	e.reset()
	e.Uptime, e.Wall, e.GCID = n.uptime, n.wall, n.id
	e.File, e.Line = p.file, n.line
	if n.line == 0 {
		e.Line = p.fileLine
	}
	full := bytes.HasPrefix(t, []byte("Full GC"))
	body := t[2:]
	if full {
		body = t[7:]
	}
	if d, ok := secs(t); ok {
		e.Pause = d
	}
	e.Heap, _ = transition(t)
	e.Young, e.Old, e.Meta = n.young, n.old, n.meta
	e.RefProc = n.refProc
	var mixed, initialMark, toSpace, hasCause bool
	parenGroups(body, func(g []byte) {
		switch {
		case bytes.Equal(g, []byte("young")):
		case bytes.Equal(g, []byte("mixed")):
			mixed = true
		case bytes.Equal(g, []byte("initial-mark")):
			initialMark = true
		case bytes.HasPrefix(g, []byte("to-space")):
			toSpace = true
		default:
			if !hasCause {
				e.Cause = p.str(g)
				hasCause = true
			}
		}
	})
	e.ToSpaceExhausted = toSpace
	e.ConcurrentModeFailure = n.cmf
	e.PromotionFailed = n.promotionFailed || bytes.HasPrefix(body, []byte("--"))
	pause := bytes.HasPrefix(body, []byte(" pause"))
	switch {
	case n.initialMark || e.Cause == "CMS Initial Mark":
		e.Kind, e.Name = KindInitialMark, "CMS-initial-mark"
	case n.remark || e.Cause == "CMS Final Remark" && (n.hasInner || !n.young.Known()):
		// With -XX:+PrintGC only, a remark is "[GC (CMS Final Remark)
		// ..." with no CMS-remark child; the scavenge before it has the
		// same cause and a young generation (or heap transition).
		e.Kind, e.Name = KindRemark, "CMS-remark"
	case bytes.HasPrefix(body, []byte(" remark")):
		e.Kind, e.Name = KindRemark, "GC remark"
	case bytes.HasPrefix(body, []byte(" cleanup")):
		e.Kind, e.Name = KindCleanup, "GC cleanup"
	case full || n.oldTimed:
		e.Kind, e.Name = KindFull, "Full GC"
		if !full && n.youngName != "" {
			// A young collection that failed and became a full one
			// (ParNew promotion failed → CMS): one stop, escalated.
			e.Escalated = true
		}
	case pause && mixed:
		e.Kind, e.Name = KindMixed, "GC pause (mixed)"
	case pause:
		e.Kind, e.Name = KindYoung, "GC pause (young)"
		e.InitialMark = initialMark
	default:
		e.Kind, e.Name = KindYoung, "GC"
		if n.youngName != "" {
			e.Name = n.youngName
		}
	}
	if n.hasInner {
		mergeInner(e, &n.inner)
	}
	return e
}

// jdk8Record finishes a top-level record: its event waits for the lines
// printed after it.
func (p *Parser) jdk8Record(n *node, t []byte) {
	j := &p.j
	j.flushPending(p)
	e := p.jdk8Event(n, t)
	// G1 prints "[Eden: ... Heap: ...]" after the record closes. Records
	// with generation children are complete.
	j.pendingSizes = (e.Name == "GC pause (young)" || e.Name == "GC pause (mixed)" || e.Kind == KindFull) &&
		!n.young.Known() && !n.old.Known()
	j.pending = *e
	j.hasPending = true
}

func (j *jdk8) flushPending(p *Parser) {
	if !j.hasPending {
		return
	}
	j.hasPending, j.pendingSizes = false, false
	p.emit(&j.pending)
}

// times reads "user=0.03 sys=0.01, real=0.01 secs" into the waiting event
// and emits it: nothing else of it follows.
func (p *Parser) times(b []byte) {
	j := &p.j
	if !j.hasPending {
		return
	}
	e := &j.pending
	e.User, e.Sys, e.Real = cpuField(b, "user="), cpuField(b, "sys="), cpuField(b, "real=")
	j.flushPending(p)
}

// cpuField reads the seconds after key ("user=0.03", unified "User=0.02s");
// -1 when absent.
func cpuField(b []byte, key string) time.Duration {
	k := bytes.Index(b, []byte(key))
	if k < 0 {
		return -1
	}
	v, n := number(b[k+len(key):])
	if n == 0 {
		return -1
	}
	return seconds(v)
}

// g1Sizes reads "Eden: 960M(960M)->0B(896M) Survivors: 64M->128M Heap:
// 20701M(25936M)->20017M(25936M)" into the waiting G1 pause.
func (p *Parser) g1Sizes(t []byte) {
	j := &p.j
	if !j.hasPending || !j.pendingSizes {
		return
	}
	e := &j.pending
	e.Eden, _ = transition(t[len(pfxEden):])
	if k := bytes.Index(t, []byte("Survivors: ")); k >= 0 {
		e.Survivor, _ = transition(t[k+len("Survivors: "):])
	}
	if k := bytes.Index(t, []byte("Heap: ")); k >= 0 {
		e.Heap, _ = transition(t[k+len("Heap: "):])
	}
	if e.Eden.Known() && e.Survivor.Known() {
		e.Young = Space{e.Eden.Before + e.Survivor.Before, e.Eden.After + e.Survivor.After, -1}
	}
	j.pendingSizes = false
}

// isGCRecord tells a collection record ("GC (Allocation Failure) ...",
// "GC pause (young)", "GC remark", "GC--", "Full GC ...") from G1 detail
// nodes that also start with "GC" ("GC Worker Start", "GC ref-proc").
func isGCRecord(t []byte) bool {
	if bytes.HasPrefix(t, []byte("Full GC")) {
		return true
	}
	if !bytes.HasPrefix(t, []byte("GC")) {
		return false
	}
	r := t[2:]
	if len(r) == 0 || bytes.HasPrefix(r, []byte("--")) || isDigit(r[0]) {
		return true
	}
	if r[0] != ' ' {
		return false
	}
	r = bytes.TrimLeft(r, " ")
	if len(r) == 0 || r[0] == '(' || isDigit(r[0]) {
		return true
	}
	for _, w := range [][]byte{[]byte("pause"), []byte("remark"), []byte("cleanup")} {
		if bytes.HasPrefix(r, w) {
			return true
		}
	}
	return false
}

// nameMs reads "Parallel Time: 3.2 ms, GC Workers: 8" as ("Parallel
// Time", 3.2 ms).
func nameMs(t []byte) ([]byte, time.Duration, bool) {
	k := bytes.Index(t, []byte(": "))
	if k <= 0 {
		return nil, 0, false
	}
	r := t[k+2:]
	v, n := number(r)
	if n == 0 || !bytes.HasPrefix(r[n:], []byte(" ms")) {
		return nil, 0, false
	}
	return t[:k], seconds(v / 1e3), true
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

func indexFrom(b []byte, from int, c byte) int {
	if k := bytes.IndexByte(b[from:], c); k >= 0 {
		return from + k
	}
	return len(b)
}
