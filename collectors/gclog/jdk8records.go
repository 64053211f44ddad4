package gclog

import (
	"bytes"
	"math"
	"time"
)

// The names a JDK 6–8 record gives its generations and reference kinds.
var (
	youngGens = [][]byte{[]byte("ParNew"), []byte("DefNew"), []byte("PSYoungGen"), []byte("ASParNew")}
	permGens  = [][]byte{[]byte("CMS Perm"), []byte("Perm"), []byte("PSPermGen"), []byte("Metaspace")}
	oldGens   = [][]byte{[]byte("Tenured"), []byte("ParOldGen"), []byte("PSOldGen"), []byte("ASCMS"), []byte("CMS")}
	refKinds  = [][]byte{[]byte("SoftReference"), []byte("WeakReference"), []byte("FinalReference"), []byte("PhantomReference"), []byte("JNI Weak Reference")}
)

// closeNode acts on the node at depth d as its ']' closes it: a concurrent
// phase or a record becomes an event (a record waits for what follows it),
// a collection nested in a record becomes its inner event, and a
// generation's, G1 detail's or reference kind's text fills the record.
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
