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
// PrintHeapAtGC blocks, tenuring distributions, PrintFLSStatistics. So the
// parser tracks bracket depth across lines, keeps each open node's own text
// (children excluded) in a fixed-size buffer, and acts when a node closes.
// Concurrent phases close as separate events wherever they appear. G1's
// pause record closes before its "[Eden: ...]" line, so a G1 pause waits
// (at most until the next record) for it.

const (
	maxDepth    = 12
	maxNodeText = 4096
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

	young, old, meta     Space
	youngName            string
	oldTimed             bool
	initialMark, remark  bool
	cmf, promotionFailed bool
	nested               time.Duration
}

func (n *node) reset() {
	n.text = n.text[:0]
	n.seg = 0
	n.uptime = math.NaN()
	n.wall = time.Time{}
	n.id = -1
	n.young, n.old, n.meta = unknownSpace, unknownSpace, unknownSpace
	n.youngName = ""
	n.oldTimed, n.initialMark, n.remark, n.cmf, n.promotionFailed = false, false, false, false, false
	n.nested = 0
}

type jdk8 struct {
	depth int
	// overflow counts brackets nested deeper than maxDepth (ignored).
	overflow    int
	nodes       [maxDepth + 1]node
	heapBlock   bool
	recordLines int
	pending     Event
	hasPending  bool
}

var (
	pfxHeapBefore = []byte("{Heap before GC")
	pfxHeapAfter  = []byte("Heap after GC")
	pfxTimes      = []byte("Times: ")
	sfxBeforeGC   = []byte("Before GC:")
	sfxAfterGC    = []byte("After GC:")
)

// Lines of text that JDK 8 writes around GC records and that carry nothing
// the analysis needs.
var jdk8Noise = [][]byte{
	[]byte("- age "), []byte("Statistics for "), []byte("-----"), []byte("Total Free Space:"),
	[]byte("Max   Chunk Size:"), []byte("Number of Blocks:"), []byte("Av.  Block  Size:"),
	[]byte("Tree      Height:"), []byte(" free="), []byte("OpenJDK "), []byte("Java HotSpot"),
	[]byte("Memory: "), []byte("Application time:"),
}

func (p *Parser) jdk8Line(b []byte) {
	j := &p.j
	if j.heapBlock {
		if len(b) == 0 {
			return
		}
		if b[0] == '}' {
			j.heapBlock = false
			return
		}
		if b[0] == ' ' {
			t := bytes.TrimLeft(b, " ")
			if len(t) > 0 && t[0] != '[' && t[0] != '(' && t[0] != ',' && t[0] != ':' {
				return
			}
		}
		if bytes.HasPrefix(b, pfxHeapAfter) || bytes.HasPrefix(b, pfxHeapBefore) {
			return
		}
		j.heapBlock = false
	}
	if bytes.HasPrefix(b, pfxHeapBefore) || bytes.HasPrefix(b, pfxHeapAfter) || string(b) == "Heap" {
		j.heapBlock = true
		return
	}
	if k := bytes.Index(b, pfxHeapBefore); k >= 0 {
		b = b[:k]
		j.heapBlock = true
	}
	b = bytes.TrimRight(b, " \t")
	if bytes.HasSuffix(b, sfxBeforeGC) {
		b = b[:len(b)-len(sfxBeforeGC)]
	} else if bytes.HasSuffix(b, sfxAfterGC) {
		b = b[:len(b)-len(sfxAfterGC)]
	}
	if len(b) == 0 {
		return
	}
	// Records start with a stamp (a digit) or a bracket; only other lines
	// can be noise, which keeps the prefix checks off the hot path.
	if c := b[0]; !isDigit(c) && c != '[' {
		for _, n := range jdk8Noise {
			if bytes.HasPrefix(b, n) {
				return
			}
		}
		if bytes.HasPrefix(b, pfxDesired) {
			p.tenuring(b)
			return
		}
		if bytes.HasPrefix(b, []byte("CommandLine flags:")) {
			if p.Stats.Collector == "" {
				p.Stats.Collector = collectorFromFlags(b)
			}
			return
		}
	}
	if j.depth == 0 {
		rest := skipStamps(b)
		switch {
		case bytes.HasPrefix(rest, pfxStopped):
			p.stopped(rest[len(pfxStopped):])
			return
		case bytes.HasPrefix(rest, []byte("Application time:")):
			return
		case bytes.Contains(rest, []byte("GC log file ")):
			return // rotation notices
		}
	} else {
		j.recordLines++
		if j.recordLines > maxRecordLines {
			// A record that never closes: drop it and start afresh.
			p.unknown([]byte("(unterminated GC record)"))
			j.depth, j.overflow, j.recordLines = 0, 0, 0
			j.nodes[0].text = j.nodes[0].text[:0]
		}
	}
	p.brackets(b)
}

// brackets runs the bracket machine over one line.
func (p *Parser) brackets(b []byte) {
	j := &p.j
	startDepth := j.depth
	opened := false
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
			n := &j.nodes[j.depth]
			if room := maxNodeText - len(n.text); room > 0 {
				seg := b[i:k]
				if len(seg) > room {
					seg = seg[:room]
				}
				n.text = append(n.text, seg...)
			}
		}
		if k >= len(b) {
			break
		}
		if b[k] == '[' {
			opened = true
			if j.overflow > 0 || j.depth >= maxDepth {
				j.overflow++
				i = k + 1
				continue
			}
			// [Times: user=... real=...] is on every record and never
			// needed: skip it without buffering.
			if bytes.HasPrefix(b[k+1:], pfxTimes) {
				if e := bytes.IndexByte(b[k+1:], ']'); e >= 0 {
					i = k + 2 + e
					continue
				}
			}
			parent := &j.nodes[j.depth]
			j.depth++
			n := &j.nodes[j.depth]
			n.reset()
			n.uptime, n.wall, n.id = stamps(parent.text[parent.seg:])
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
			continue // stray
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
		if startDepth == 0 && !opened && len(bytes.TrimSpace(skipStamps(n.text))) > 0 {
			p.unknown(b)
		}
		n.text = n.text[:0]
		n.seg = 0
	} else if j.overflow == 0 {
		n := &j.nodes[j.depth]
		if len(n.text) < maxNodeText {
			n.text = append(n.text, ' ')
		}
	}
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
		if i+n < len(b) && b[i+n] == ':' && bytes.IndexAny(b[i:i+n], ".,") > 0 {
			up = v
		}
		if n > 0 {
			i += n - 1
		}
	}
	return up, wall, id
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
)

func hasAnyPrefix(b []byte, ps [][]byte) []byte {
	for _, p := range ps {
		if bytes.HasPrefix(b, p) {
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
	case isGCRecord(t):
		if d == 1 {
			p.jdk8Record(n, t)
			return
		}
		// A collection inside another record: CMS's scavenge before
		// remark. It is its own young pause, and the enclosing pause's
		// time includes it.
		e := p.jdk8Event(n, t)
		if parent != nil {
			parent.nested += e.Pause
			p.j.flushPending(p)
			p.emit(e)
		}
	case d == 1 && bytes.HasPrefix(t, []byte("Eden: ")):
		p.g1Sizes(t)
	case parent == nil:
		// Other top-level detail ([Parallel Time: ...], [Metaspace ...]).
	case hasAnyPrefix(t, youngGens) != nil:
		parent.young, _ = transition(t)
		parent.youngName = p.str(hasAnyPrefix(t, youngGens))
		if bytes.Contains(t, []byte("promotion failed")) {
			parent.promotionFailed = true
		}
	case hasAnyPrefix(t, permGens) != nil:
		parent.meta, _ = transition(t)
	case bytes.HasPrefix(t, []byte("1 CMS-initial-mark")):
		parent.initialMark = true
	case bytes.HasPrefix(t, []byte("1 CMS-remark")):
		parent.remark = true
	case hasAnyPrefix(t, oldGens) != nil:
		parent.old, _ = transition(t)
		if _, ok := secs(t); ok {
			parent.oldTimed = true
		}
		if bytes.Contains(t, []byte("concurrent mode failure")) || bytes.Contains(t, []byte("concurrent mode interrupted")) {
			parent.cmf = true
		}
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
	e.Kind = KindConcurrent
	e.Duration = d
	end := bytes.IndexAny(t, ":,")
	if end < 0 {
		end = len(t)
	}
	e.Name = p.str(t[:end])
	p.emit(e)
}

// jdk8Event builds the event of a closed "[GC ..." or "[Full GC ..." node
// into p.ev.
func (p *Parser) jdk8Event(n *node, t []byte) *Event {
	e := &p.ev
	e.reset()
	e.Uptime, e.Wall, e.GCID = n.uptime, n.wall, n.id
	full := bytes.HasPrefix(t, []byte("Full GC"))
	body := t[2:]
	if full {
		body = t[7:]
	}
	if d, ok := secs(t); ok {
		e.Pause = d
		if n.nested > 0 && n.nested < d {
			e.Pause = d - n.nested
		}
	}
	e.Heap, _ = transition(t)
	e.Young, e.Old, e.Meta = n.young, n.old, n.meta
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
	case n.initialMark:
		e.Kind, e.Name = KindInitialMark, "CMS-initial-mark"
	case n.remark:
		e.Kind, e.Name = KindRemark, "CMS-remark"
	case bytes.HasPrefix(body, []byte(" remark")):
		e.Kind, e.Name = KindRemark, "GC remark"
	case bytes.HasPrefix(body, []byte(" cleanup")):
		e.Kind, e.Name = KindCleanup, "GC cleanup"
	case full || n.oldTimed:
		e.Kind, e.Name = KindFull, "Full GC"
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
	return e
}

// jdk8Record finishes a top-level record.
func (p *Parser) jdk8Record(n *node, t []byte) {
	j := &p.j
	j.flushPending(p)
	e := p.jdk8Event(n, t)
	// G1 prints "[Eden: ... Heap: ...]" after the record closes; hold the
	// event until then. Records with generation children are complete.
	g1 := (e.Name == "GC pause (young)" || e.Name == "GC pause (mixed)" || e.Kind == KindFull) &&
		!n.young.Known() && !n.old.Known()
	if g1 {
		j.pending = *e
		j.hasPending = true
		return
	}
	p.emit(e)
}

func (j *jdk8) flushPending(p *Parser) {
	if !j.hasPending {
		return
	}
	j.hasPending = false
	p.emit(&j.pending)
}

// g1Sizes reads "Eden: 960M(960M)->0B(896M) Survivors: 64M->128M Heap:
// 20701M(25936M)->20017M(25936M)" into the waiting G1 pause.
func (p *Parser) g1Sizes(t []byte) {
	j := &p.j
	if !j.hasPending {
		return
	}
	e := &j.pending
	e.Eden, _ = transition(t[len("Eden: "):])
	if k := bytes.Index(t, []byte("Survivors: ")); k >= 0 {
		e.Survivor, _ = transition(t[k+len("Survivors: "):])
	}
	if k := bytes.Index(t, []byte("Heap: ")); k >= 0 {
		e.Heap, _ = transition(t[k+len("Heap: "):])
	}
	if e.Eden.Known() && e.Survivor.Known() {
		e.Young = Space{e.Eden.Before + e.Survivor.Before, e.Eden.After + e.Survivor.After, -1}
	}
	j.flushPending(p)
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

func indexFrom(b []byte, from int, c byte) int {
	if k := bytes.IndexByte(b[from:], c); k >= 0 {
		return from + k
	}
	return len(b)
}
