package gclog

import (
	"bytes"
	"math"
	"time"
)

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
			i = p.openBracket(b, k, startDepth, startLen)
			continue
		}
		// ']'
		i = k + 1
		stray = p.closeBracket(b, k, stray)
	}
	p.endLine(b, startDepth, opened, stray)
}

// openBracket takes the '[' at b[k] (not an address range) and returns
// where the scan goes on: past a [Times: ...] block, or into a node one
// level down, a record when its text looks like one. The line began at
// startDepth with startLen bytes of that node's text.
func (p *Parser) openBracket(b []byte, k, startDepth, startLen int) int {
	j := &p.j
	rest := b[k+1:]
	if j.overflow > 0 || j.depth >= maxDepth {
		j.overflow++
		return k + 1
	}
	// [Times: user=... sys=..., real=... secs] follows records.
	if bytes.HasPrefix(rest, pfxTimes) {
		if e := bytes.IndexByte(rest, ']'); e >= 0 {
			if j.depth == 0 {
				p.times(rest[len(pfxTimes):e])
			}
			return k + 2 + e
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
	return k + 1
}

// closeBracket takes the ']' at b[k]: it closes the open node, or with
// none open may be a record's end whose start the log does not have.
// stray says the line was already counted as one; it returns whether it
// is now.
func (p *Parser) closeBracket(b []byte, k int, stray bool) bool {
	j := &p.j
	if j.overflow > 0 {
		j.overflow--
		return stray
	}
	if j.depth == 0 {
		// A record's end without its start: the log (or a fragment of
		// it) begins inside a record.
		if !stray && bytes.HasSuffix(bytes.TrimRight(b[:k], " "), []byte("secs")) {
			p.unrecognised(p.fileLine, "a record's end without its start", b)
			stray = true
		}
		return stray
	}
	p.closeNode(j.depth)
	j.depth--
	parent := &j.nodes[j.depth]
	parent.seg = len(parent.text)
	if j.depth == 0 {
		j.recordLines = 0
	}
	return stray
}

// endLine ends line b: at the top level, text of a line that opened no
// bracket and began outside a record is a pause with no record or an
// unknown line; inside a record the line break becomes a space.
func (p *Parser) endLine(b []byte, startDepth int, opened, stray bool) {
	j := &p.j
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
