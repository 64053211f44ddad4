package gclog

import (
	"bytes"
	"math"
	"time"
)

// JDK 9+ unified logging: "[decorations...] message". A GC's details
// (generation sizes, region counts, to-space exhaustion) come on lines
// before its summary line "GC(n) Pause Young (...) A->B(C) 1.234ms", so
// they wait in a small table keyed by GC id.

type pendingGC struct {
	eden, survivor, old, young, meta Space
	edenRegions, survivorRegions     Space
	humBefore, humAfter              int64
	toSpace                          bool
	refProc                          time.Duration
	// inner is a collection that ran inside this one: Serial and CMS log a
	// young GC that turns into a full GC as two GCs, the full one inside
	// the young one's time. It is reported with this one as one escalated
	// pause.
	inner    Event
	hasInner bool
	// open: the "Pause ..." start line was seen, its end not yet; line and
	// first say where, for the report if the end never comes.
	open  bool
	line  int64
	first []byte
}

type unified struct {
	pending map[int64]*pendingGC
	// openPauses are GC ids whose "Pause ..." start line was seen and whose
	// end line was not, innermost last.
	openPauses []int64
	// last is the last pause, waiting for its gc,cpu line (which follows
	// the pause line) until a line of another GC arrives.
	last    Event
	hasLast bool
}

// flushLast emits the pause waiting for its CPU line.
func (u *unified) flushLast(p *Parser) {
	if u.hasLast {
		u.hasLast = false
		p.emit(&u.last)
	}
}

// dropOpen counts the pauses whose start line was seen and whose end
// never came: the log ends inside them.
func (u *unified) dropOpen(p *Parser) {
	u.flushLast(p)
	u.forgetOpen(p, "the log ends before this pause's end line")
}

// forgetOpen counts the open pauses as unreadable (emitting a nested pause
// that did end) and forgets every pending GC.
func (u *unified) forgetOpen(p *Parser, reason string) {
	for _, id := range u.openPauses {
		if pg := u.pending[id]; pg != nil && pg.open {
			p.unrecognised(pg.line, reason, pg.first)
			if pg.hasInner {
				p.emit(&pg.inner)
			}
		}
	}
	u.openPauses = u.openPauses[:0]
	clear(u.pending)
}

func (u *unified) get(p *Parser, id int64) *pendingGC {
	if u.pending == nil {
		u.pending = make(map[int64]*pendingGC)
	}
	pg := u.pending[id]
	if pg == nil {
		if len(u.pending) > 256 {
			// Ids whose summary never came (concurrent cycles' details, a
			// truncated log): forget them rather than grow, counting the
			// pauses among them.
			u.forgetOpen(p, "this pause's end line never came")
		}
		pg = &pendingGC{
			eden: unknownSpace, survivor: unknownSpace, old: unknownSpace, young: unknownSpace,
			meta: unknownSpace, edenRegions: unknownSpace, survivorRegions: unknownSpace,
			humBefore: -1, humAfter: -1,
		}
		u.pending[id] = pg
	}
	return pg
}

// isDecoration reports whether a line starting with '[' opens with a
// unified-logging decoration (uptime, time, level, pid...), as opposed to
// a JDK 8 "[GC ..." record.
func isDecoration(b []byte) bool {
	end := bytes.IndexByte(b, ']')
	if end < 2 {
		return false
	}
	d := b[1:end]
	switch decorationKind(d) {
	case decUptime, decDate, decLevel, decPidTid:
		return true
	}
	return false
}

const (
	decNone = iota
	decUptime
	decDate
	decLevel
	decPidTid
	decTags
)

func decorationKind(d []byte) int {
	if len(d) == 0 {
		return decNone
	}
	if _, n := dateStamp(d); n > 0 && n == len(d) {
		return decDate
	}
	if isDigit(d[0]) {
		_, n := number(d)
		rest := d[n:]
		switch string(rest) {
		case "s", "ms", "ns":
			return decUptime
		case "p", "t":
			return decPidTid
		}
		return decNone
	}
	switch string(d) {
	case "trace", "debug", "info", "warning", "error":
		return decLevel
	}
	for _, c := range d {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == ',' || c == ' ' || c == '_' || c == '+') {
			return decNone
		}
	}
	return decTags
}

func (p *Parser) unifiedLine(b []byte) {
	e := &p.ev
	up := math.NaN()
	var wall time.Time
	var tags []byte
	rest := b
	for len(rest) > 0 && rest[0] == '[' {
		end := bytes.IndexByte(rest, ']')
		if end < 0 {
			break
		}
		d := rest[1:end]
		switch decorationKind(d) {
		case decUptime:
			v, n := number(d)
			switch string(d[n:]) {
			case "s":
				up = v
			case "ms":
				// uptimemillis; epoch millis (timemillis) are far larger.
				if v < 1e12 {
					up = v / 1e3
				} else {
					wall = time.UnixMilli(int64(v))
				}
			case "ns":
				if v < 1e18 {
					up = v / 1e9
				} else {
					wall = time.Unix(0, int64(v))
				}
			}
		case decDate:
			wall, _ = dateStamp(d)
		case decLevel, decPidTid:
		case decTags:
			tags = bytes.TrimSpace(d)
		default:
			goto message
		}
		rest = rest[end+1:]
	}
message:
	msg := bytes.TrimLeft(rest, " ")
	id := int64(-1)
	indent := 0
	if bytes.HasPrefix(msg, []byte("GC(")) {
		v, n := number(msg[3:])
		if n > 0 && 3+n < len(msg) && msg[3+n] == ')' {
			id = int64(v)
			after := msg[4+n:]
			msg = bytes.TrimLeft(after, " ")
			indent = len(after) - len(msg) - 1
		}
	}
	u := &p.u
	if u.hasLast && (id != u.last.GCID || id < 0) {
		u.flushLast(p)
	}
	// Generational ZGC prefixes its young/old collections' lines.
	if len(msg) > 2 && msg[1] == ':' && msg[2] == ' ' && (msg[0] == 'y' || msg[0] == 'Y' || msg[0] == 'O' || msg[0] == 'o') {
		msg = msg[3:]
	}
	handled := p.unifiedMessage(e, msg, id, up, wall)
	// After the message: a JVM's start-up line must be known as one
	// before its stamp is placed.
	p.sawTime(up, wall)
	if handled {
		return
	}
	d, head, timed := durationSuffix(msg)
	if id >= 0 && !timed && (indent > 0 || bytes.HasPrefix(msg, []byte("Phase ")) || bytes.HasSuffix(msg, []byte(" Phase"))) {
		return // a phase's start line
	}
	if id >= 0 && timed && !bytes.HasPrefix(msg, pfxPause) {
		// A pause's phase: "Evacuate Collection Set: 3.3ms" (indented),
		// "Phase 1: Mark live objects 1.788ms", "Marking Phase 165.1ms";
		// the top-level ones count.
		// Generational ZGC's "Young Generation 30M(31%)->26M(27%) 0.019s"
		// summarises a generation's collection, not a phase of a pause.
		if indent <= 2 && !bytes.Contains(head, []byte("->")) {
			p.phase(head, d)
		}
		return
	}
	// Unparsed detail under a detail tag (gc,task, safepoint...) is
	// expected; only lines under plain "gc" (or untagged) are unknown —
	// or, when they look like a collection's summary, unreadable records.
	if len(tags) == 0 || bytes.Equal(tags, []byte("gc")) {
		if bytes.HasPrefix(msg, pfxPause) {
			p.unrecognised(p.fileLine, "not a GC record perfscope knows", b)
		} else if len(msg) > 0 {
			p.unknown(b)
		}
	}
}

var (
	pfxUsing        = []byte("Using ")
	pfxInitializing = []byte("Initializing The Z Garbage Collector")
	pfxRegion1      = []byte("Heap region size: ")
	pfxRegion2      = []byte("Heap Region Size: ")
	pfxPause        = []byte("Pause ")
	pfxConcurrent   = []byte("Concurrent ")
	pfxStopped      = []byte("Total time for which application threads were stopped: ")
	pfxSafepoint    = []byte("Safepoint \"")
	pfxToSpace      = []byte("To-space exhausted")
	pfxStall        = []byte("Allocation Stall (")
	pfxDesired      = []byte("Desired survivor size")
	pfxEdenRegions  = []byte("Eden regions: ")
	pfxSurvRegions  = []byte("Survivor regions: ")
	pfxOldRegions   = []byte("Old regions: ")
	pfxHumRegions   = []byte("Humongous regions: ")
	pfxMetaspace    = []byte("Metaspace: ")
	pfxUser         = []byte("User=")
	pfxRefProc      = []byte("Reference Processing")
	pfxVersion      = []byte("Version: ")
)

// unifiedMessage handles one message; false when it was not understood.
func (p *Parser) unifiedMessage(e *Event, msg []byte, id int64, up float64, wall time.Time) bool {
	u := &p.u
	switch {
	case bytes.HasPrefix(msg, pfxPause):
		return p.unifiedPause(e, msg, id, up, wall)
	case bytes.HasPrefix(msg, pfxConcurrent):
		return p.unifiedConcurrent(e, msg, id, up, wall)
	case bytes.HasPrefix(msg, []byte("Garbage Collection (")), bytes.HasPrefix(msg, []byte("Minor Collection (")),
		bytes.HasPrefix(msg, []byte("Major Collection (")):
		// ZGC's cycle summary: concurrent, but it carries the heap before
		// and after, which the allocation rate needs.
		return p.zgcCycle(e, msg, id, up, wall)
	case id >= 0 && bytes.HasPrefix(msg, pfxEdenRegions):
		s, ok := regionTransition(msg[len(pfxEdenRegions):])
		u.get(p, id).edenRegions = s
		return ok
	case id >= 0 && bytes.HasPrefix(msg, pfxSurvRegions):
		s, ok := regionTransition(msg[len(pfxSurvRegions):])
		u.get(p, id).survivorRegions = s
		return ok
	case id >= 0 && bytes.HasPrefix(msg, pfxOldRegions):
		s, ok := regionTransition(msg[len(pfxOldRegions):])
		if ok && p.Stats.RegionBytes > 0 {
			r := p.Stats.RegionBytes
			u.get(p, id).old = Space{s.Before * r, s.After * r, -1}
		}
		return ok
	case id >= 0 && bytes.HasPrefix(msg, pfxHumRegions):
		s, ok := regionTransition(msg[len(pfxHumRegions):])
		pg := u.get(p, id)
		pg.humBefore, pg.humAfter = s.Before, s.After
		return ok
	case id >= 0 && bytes.HasPrefix(msg, pfxMetaspace):
		s, ok := transition(msg)
		u.get(p, id).meta = s
		return ok
	case id >= 0 && bytes.HasPrefix(msg, pfxToSpace):
		u.get(p, id).toSpace = true
		return true
	case id >= 0 && isGenerationLine(msg):
		p.unifiedGeneration(msg, id)
		return true
	case id >= 0 && bytes.HasPrefix(msg, pfxUser):
		if u.hasLast && u.last.GCID == id {
			e := &u.last
			e.User, e.Sys, e.Real = cpuField(msg, "User="), cpuField(msg, "Sys="), cpuField(msg, "Real=")
			u.flushLast(p)
		}
		return true
	case id >= 0 && bytes.HasPrefix(msg, pfxRefProc):
		if d, ok := msDuration(msg); ok {
			pg := u.get(p, id)
			pg.refProc = max(pg.refProc, d)
		}
		return true
	case bytes.HasPrefix(msg, pfxUsing):
		name := collectorName(msg[len(pfxUsing):])
		if name == "" {
			// "Using 8 workers of 8 for evacuation".
			return bytes.Contains(msg, []byte(" workers"))
		}
		p.jvmStart()
		if p.Stats.Collector == "" {
			p.Stats.Collector = name
		}
		return true
	case bytes.HasPrefix(msg, pfxInitializing):
		p.jvmStart()
		if p.Stats.Collector == "" {
			p.Stats.Collector = "ZGC"
		}
		return true
	case bytes.HasPrefix(msg, pfxVersion):
		p.jvmStart()
		return true
	case bytes.HasPrefix(msg, pfxRegion1), bytes.HasPrefix(msg, pfxRegion2):
		if v, n := size(msg[len(pfxRegion1):]); n > 0 {
			p.Stats.RegionBytes = v
			return true
		}
		return false
	case bytes.HasPrefix(msg, pfxStopped):
		p.stopped(msg[len(pfxStopped):], up, wall)
		return true
	case bytes.HasPrefix(msg, pfxSafepoint):
		p.unifiedSafepoint(msg, up, wall)
		return true
	case bytes.HasPrefix(msg, pfxEntering):
		p.safepointName(msg[len(pfxEntering):])
		return true
	case bytes.HasPrefix(msg, pfxLeaving):
		return true
	case bytes.HasPrefix(msg, pfxAge):
		p.ageLine(msg)
		return true
	case bytes.HasPrefix(msg, pfxAgeTable):
		return true
	case bytes.HasPrefix(msg, pfxStall), bytes.HasPrefix(msg, []byte("Relocation Stall (")):
		if d, ok := msDuration(msg); ok && p.OnStall != nil && msg[0] == 'A' {
			p.OnStall(d)
		}
		return true
	case bytes.HasPrefix(msg, pfxDesired):
		p.desiredSurvivor(msg)
		return true
	}
	return hasAnyPrefix(msg, unifiedNoise) != nil
}

// Messages under the plain "gc" tag that carry nothing the analysis uses.
var unifiedNoise = [][]byte{
	[]byte("Heuristics "), []byte("Trigger: "), []byte("Min heap equals to max heap"),
	[]byte("Cancelling GC"), []byte("Cancel marking"), []byte("Good progress"), []byte("Bad progress"), []byte("Soft Max Heap"), []byte("Periodic GC"), []byte("Failed to "),
	[]byte("Uncommitted "), []byte("Heap "), []byte("Relocation Stall"), []byte("Application time:"), []byte("Pacer for "),
	[]byte("Adaptive CSet Selection"), []byte("Cancelling concurrent GC"), []byte("CPUs: "), []byte("Memory: "),
	[]byte("Large Page Support"), []byte("NUMA Support"), []byte("CardTable entry size"), []byte("ParallelGCThreads"),
	[]byte("ConcGCThreads"),
	// Shenandoah (JDK 25) ends a concurrent cycle an allocation failure
	// interrupted with a bare "GC(N) Cancelled"; the degenerated or full
	// pause that follows is its own line.
	[]byte("Cancelled"),
}

func collectorName(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("G1")):
		return "G1"
	case bytes.HasPrefix(b, []byte("Parallel")):
		return "Parallel"
	case bytes.HasPrefix(b, []byte("Serial")):
		return "Serial"
	case bytes.HasPrefix(b, []byte("Concurrent Mark Sweep")):
		return "CMS"
	case bytes.HasPrefix(b, []byte("Shenandoah")):
		return "Shenandoah"
	case bytes.HasPrefix(b, []byte("The Z Garbage Collector")), bytes.HasPrefix(b, []byte("ZGC")):
		return "ZGC"
	case bytes.HasPrefix(b, []byte("Epsilon")):
		return "Epsilon"
	}
	return ""
}

func regionTransition(b []byte) (Space, bool) {
	before, n := number(b)
	if n == 0 || n+2 > len(b) || b[n] != '-' || b[n+1] != '>' {
		return unknownSpace, false
	}
	after, m := number(b[n+2:])
	if m == 0 {
		return unknownSpace, false
	}
	s := Space{int64(before), int64(after), -1}
	rest := b[n+2+m:]
	if len(rest) > 1 && rest[0] == '(' {
		if c, k := number(rest[1:]); k > 0 {
			s.Capacity = int64(c)
		}
	}
	return s, true
}

var genNames = [...]string{"DefNew: ", "PSYoungGen: ", "ParNew: ", "Tenured: ", "ParOldGen: ", "PSOldGen: ", "CMS: "}

func isGenerationLine(msg []byte) bool {
	for _, g := range genNames {
		if bytes.HasPrefix(msg, []byte(g)) {
			return true
		}
	}
	return false
}

// unifiedGeneration reads "DefNew: 26214K->3263K(29504K)" and the JDK 17+
// form "PSYoungGen: 33275K(38400K)->5090K(38400K) Eden: ...->...(...)
// From: ...".
func (p *Parser) unifiedGeneration(msg []byte, id int64) {
	pg := p.u.get(p, id)
	s, _ := transition(msg)
	switch {
	case msg[0] == 'D' || msg[0] == 'P' && msg[1] == 'S' && msg[2] == 'Y' || bytes.HasPrefix(msg, []byte("ParNew")):
		pg.young = s
		if k := bytes.Index(msg, []byte(" Eden: ")); k >= 0 {
			pg.eden, _ = transition(msg[k+7:])
		}
		if k := bytes.Index(msg, []byte(" From: ")); k >= 0 {
			pg.survivor, _ = transition(msg[k+7:])
		}
	default:
		pg.old = s
	}
}

// durationSuffix parses the trailing "1.234ms" / "0.123s" / "12us" of a
// message and returns the text before it.
func durationSuffix(msg []byte) (time.Duration, []byte, bool) {
	m := bytes.TrimRight(msg, " ")
	var unit float64
	var ul int
	switch {
	case bytes.HasSuffix(m, []byte("ms")):
		unit, ul = 1e6, 2
	case bytes.HasSuffix(m, []byte("us")):
		unit, ul = 1e3, 2
	case bytes.HasSuffix(m, []byte("µs")):
		unit, ul = 1e3, len("µs")
	case bytes.HasSuffix(m, []byte("ns")):
		unit, ul = 1, 2
	case bytes.HasSuffix(m, []byte("s")):
		unit, ul = 1e9, 1
	default:
		return 0, msg, false
	}
	num := m[:len(m)-ul]
	beg := len(num)
	for beg > 0 && (isDigit(num[beg-1]) || num[beg-1] == '.' || num[beg-1] == ',') {
		beg--
	}
	if beg == len(num) || (beg > 0 && num[beg-1] != ' ') {
		return 0, msg, false
	}
	v, n := number(num[beg:])
	if n != len(num)-beg {
		return 0, msg, false
	}
	d := math.Round(v * unit)
	if d > 1e18 {
		d = 1e18
	}
	return time.Duration(d), num[:beg], true
}

func msDuration(msg []byte) (time.Duration, bool) {
	d, _, ok := durationSuffix(msg)
	return d, ok
}

// stamp dates a unified event: its line is written when it ends, so it
// started d earlier.
func (p *Parser) stamp(e *Event, up float64, wall time.Time, d time.Duration) {
	e.Uptime = up - d.Seconds()
	if !wall.IsZero() {
		wall = wall.Add(-d)
	}
	e.Wall = wall
	e.Unified = true
	e.File, e.Line = p.file, p.fileLine
}

func (p *Parser) unifiedPause(e *Event, msg []byte, id int64, up float64, wall time.Time) bool {
	u := &p.u
	d, head, ok := durationSuffix(msg)
	if !ok {
		// A "Pause Young (...)" start line: remember it is open so that a
		// collection nested inside it is not counted twice, and so that a
		// log ending inside it says so.
		if id >= 0 {
			pg := u.get(p, id)
			pg.open, pg.line = true, p.fileLine
			pg.first = append(pg.first[:0], msg[:min(len(msg), 200)]...)
			if len(u.openPauses) < 64 {
				u.openPauses = append(u.openPauses, id)
			}
		}
		return true
	}
	u.flushLast(p)
	e.reset()
	p.stamp(e, up, wall, d)
	e.GCID = id
	e.Pause = d
	body := head[len(pfxPause):]
	// The name runs to the first '(' or size.
	nameEnd := len(body)
	for i, c := range body {
		if c == '(' || isDigit(c) {
			nameEnd = i
			break
		}
	}
	name := bytes.TrimRight(body[:nameEnd], " ")
	e.Name = p.str(head[:len(pfxPause)+len(name)])
	var hasCause, mixed, concurrentStart, evacFailure bool
	parenGroups(body[nameEnd:], func(g []byte) {
		switch {
		case bytes.Equal(g, []byte("Normal")), bytes.Equal(g, []byte("Prepare Mixed")):
		case bytes.Equal(g, []byte("Mixed")):
			mixed = true
		case bytes.Equal(g, []byte("Concurrent Start")):
			concurrentStart = true
		case bytes.HasPrefix(g, []byte("Evacuation Failure")):
			evacFailure = true
		case bytes.Equal(g, []byte("unload classes")), bytes.Equal(g, []byte("process weakrefs")),
			bytes.Equal(g, []byte("update refs")), bytes.Equal(g, []byte("Outside of Cycle")):
			// Shenandoah qualifiers, not causes.
		default:
			if !hasCause {
				e.Cause = p.str(g)
				hasCause = true
			}
		}
	})
	e.Heap, _ = transition(body[nameEnd:])
	switch string(name) {
	case "Young":
		e.Kind = KindYoung
		if mixed {
			e.Kind = KindMixed
		}
		e.InitialMark = concurrentStart
	case "Mixed":
		e.Kind = KindMixed
	case "Initial Mark":
		// G1 (JDK 9–11) piggybacks marking on a young pause, which names
		// its cause; CMS's initial mark names none.
		if hasCause {
			e.Kind = KindYoung
			e.InitialMark = true
		} else {
			e.Kind = KindInitialMark
		}
	case "Full", "Degenerated GC":
		e.Kind = KindFull
	case "Remark", "Final Mark", "Mark End":
		e.Kind = KindRemark
	case "Cleanup":
		e.Kind = KindCleanup
	case "Init Mark", "Mark Start":
		e.Kind = KindInitialMark
	default:
		e.Kind = KindPause
	}
	e.ToSpaceExhausted = evacFailure
	if id < 0 {
		p.emit(e)
		return true
	}
	pg := u.pending[id]
	if pg != nil {
		p.applyPending(e, pg)
		delete(u.pending, id)
	}
	// Close the pause; if another is still open around it, that one's
	// time includes this one: the two are one escalated stop, reported
	// when the outer one ends.
	for i := len(u.openPauses) - 1; i >= 0; i-- {
		if u.openPauses[i] != id {
			continue
		}
		u.openPauses = append(u.openPauses[:i], u.openPauses[i+1:]...)
		if i > 0 {
			outer := u.get(p, u.openPauses[i-1])
			if !outer.hasInner {
				outer.inner, outer.hasInner = *e, true
				return true
			}
		}
		break
	}
	if pg != nil && pg.hasInner {
		mergeInner(e, &pg.inner)
	}
	u.last, u.hasLast = *e, true
	return true
}

// mergeInner makes e and inner, a collection logged inside e's stop, one
// pause of e's whole time. A young pause that contained a full collection
// escalated: the pause is a full one, the young part detail. A remark that
// contained a young collection (CMS's scavenge before remark) stays a
// remark that also collected the young generation.
func mergeInner(e, inner *Event) {
	part := max(e.Pause-inner.Pause, 0)
	if inner.Kind == KindFull {
		e.Escalated, e.YoungPart = true, part
		e.Kind, e.Name = inner.Kind, inner.Name
		if inner.Cause != "" {
			e.Cause = inner.Cause
		}
		e.ConcurrentModeFailure = e.ConcurrentModeFailure || inner.ConcurrentModeFailure
	} else {
		e.Scavenge, e.YoungPart = true, inner.Pause
		if inner.Eden.Known() && !e.Eden.Known() {
			e.Eden, e.Survivor = inner.Eden, inner.Survivor
		}
		if inner.Young.Known() {
			e.Young = inner.Young
		}
		if inner.Old.Known() && !e.Old.Known() {
			e.Old = inner.Old
		}
		if inner.Heap.Known() {
			// The scavenge's before/after is what allocation and promotion
			// are computed from.
			e.Heap = inner.Heap
		}
	}
	if !e.Heap.Known() {
		e.Heap = inner.Heap
	}
	if !e.Young.Known() {
		e.Young = inner.Young
	}
	e.ToSpaceExhausted = e.ToSpaceExhausted || inner.ToSpaceExhausted
	e.PromotionFailed = e.PromotionFailed || inner.PromotionFailed
	e.RefProc = max(e.RefProc, inner.RefProc)
}

func (p *Parser) applyPending(e *Event, pg *pendingGC) {
	r := p.Stats.RegionBytes
	e.Young, e.Old, e.Meta = pg.young, pg.old, pg.meta
	e.Eden, e.Survivor = pg.eden, pg.survivor
	if pg.edenRegions.Known() && r > 0 {
		e.Eden = Space{pg.edenRegions.Before * r, pg.edenRegions.After * r, capOrUnknown(pg.edenRegions.Capacity, r)}
	}
	if pg.survivorRegions.Known() && r > 0 {
		e.Survivor = Space{pg.survivorRegions.Before * r, pg.survivorRegions.After * r, capOrUnknown(pg.survivorRegions.Capacity, r)}
	}
	if e.Eden.Known() && e.Survivor.Known() && !e.Young.Known() {
		e.Young = Space{e.Eden.Before + e.Survivor.Before, e.Eden.After + e.Survivor.After, -1}
	}
	e.HumongousBefore, e.HumongousAfter = pg.humBefore, pg.humAfter
	e.RefProc = pg.refProc
	if pg.toSpace {
		e.ToSpaceExhausted = true
	}
}

func capOrUnknown(c, r int64) int64 {
	if c < 0 {
		return -1
	}
	return c * r
}

func (p *Parser) unifiedConcurrent(e *Event, msg []byte, id int64, up float64, wall time.Time) bool {
	d, head, ok := durationSuffix(msg)
	if !ok {
		return true // a phase's start line
	}
	e.reset()
	p.stamp(e, up, wall, d)
	e.GCID = id
	e.Kind = KindConcurrent
	e.Duration = d
	name := head
	if k := bytes.IndexAny(name, "(0123456789"); k > 0 {
		name = name[:k]
	}
	e.Name = p.str(bytes.TrimRight(name, " "))
	// Shenandoah's "Concurrent cleanup 1593M->1282M(1606M)" frees memory.
	e.Heap, _ = transition(head)
	p.u.flushLast(p)
	p.emit(e)
	return true
}

func (p *Parser) zgcCycle(e *Event, msg []byte, id int64, up float64, wall time.Time) bool {
	d, head, hasDur := durationSuffix(msg)
	s, ok := transition(head)
	if !ok {
		return true // the cycle's start line
	}
	if !hasDur {
		d = 0
	}
	e.reset()
	p.stamp(e, up, wall, d)
	e.GCID = id
	e.Kind = KindConcurrent
	e.Duration = d
	e.CycleSummary = true
	k := bytes.IndexByte(head, '(')
	e.Name = p.str(bytes.TrimRight(head[:k], " "))
	parenGroups(head[k:], func(g []byte) {
		if e.Cause == "" {
			e.Cause = p.str(g)
		}
	})
	e.Heap = s
	p.u.flushLast(p)
	p.emit(e)
	return true
}
