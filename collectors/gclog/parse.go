package gclog

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// maxSamples is how many unknown lines (and unreadable records) are kept
// verbatim for the report.
const maxSamples = 5

// RecordSample is one GC record the parser saw but could not turn into an
// event: where it is, why, and its first line.
type RecordSample struct {
	File   string `json:"file,omitempty"`
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
	Text   string `json:"text"`
}

// Stats says how much of the input the parser understood.
type Stats struct {
	// Lines are counted as an editor numbers them: NUL bytes do not end
	// one.
	Lines int64 `json:"lines"`
	// Bytes is every byte read (after decompression and decoding), NUL
	// bytes and over-long lines included.
	Bytes int64 `json:"bytes"`
	// Events is how many events reached the callback.
	Events int64 `json:"events"`
	// Unknown lines were neither events nor known detail.
	Unknown int64 `json:"unknown_lines"`
	// UnknownSamples are the first few unknown lines (truncated).
	UnknownSamples []string `json:"unknown_samples,omitempty"`
	// UnrecognisedRecords counts text that looked like a GC record (a
	// "[GC", "[Full GC", "Pause", "GC(n)" start, a "secs]" or "ms" end) but
	// did not become an event: pauses the numbers miss. Never silent.
	UnrecognisedRecords int64 `json:"unrecognised_records"`
	// UnrecognisedSamples are the first few of them, with line numbers.
	UnrecognisedSamples []RecordSample `json:"unrecognised_samples,omitempty"`
	// Formats seen: "jdk8" and/or "unified".
	JDK8Lines    int64 `json:"jdk8_lines"`
	UnifiedLines int64 `json:"unified_lines"`
	// Collector as declared by the log ("Using G1", CommandLine flags).
	Collector string `json:"collector,omitempty"`
	// RegionBytes is the G1/Shenandoah region size when the log states it.
	RegionBytes int64 `json:"region_bytes,omitempty"`
	// Safepoints counts the stops of application threads the log records.
	Safepoints int64 `json:"safepoints"`

	// OverlongLines are lines longer than MaxLineBytes: not read, each
	// also an unrecognised record. OverlongBytes is what they held.
	OverlongLines int64 `json:"overlong_lines"`
	OverlongBytes int64 `json:"overlong_bytes"`
	// EndsInsideLine names the files that end inside an over-long line
	// (no newline after it): cut while being written, or not text from
	// there on.
	EndsInsideLine []string `json:"ends_inside_line,omitempty"`
	// NULBytes counts NUL bytes: holes in a file (a crash, a preallocated
	// file, logrotate's copytruncate under a JVM that keeps writing at its
	// offset). They end a line and hold no text; nothing is lost to them.
	NULBytes int64 `json:"nul_bytes"`
	// Skipped are the first few over-long lines and NUL runs: where, how
	// long, and their first bytes.
	Skipped []RecordSample `json:"skipped,omitempty"`
	// Partial says that some of the input was not read (over-long lines):
	// every number covers only the rest.
	Partial bool `json:"partial"`
	// Decoded names the files that were decompressed or decoded to read
	// them.
	Decoded []Decoding `json:"decoded,omitempty"`
}

// Decoding is how one file was turned into text.
type Decoding struct {
	File string `json:"file"`
	// Compression is "gzip", "zstd" or "" (none).
	Compression string `json:"compression,omitempty"`
	// Encoding is the text's encoding when it was not UTF-8 ("UTF-16LE",
	// "UTF-8 with BOM").
	Encoding string `json:"encoding,omitempty"`
}

// Parser turns GC log text into events. Feed it one or more readers in
// order (a rotated set is one log), then call Flush.
type Parser struct {
	// OnEvent receives each event; the pointer is reused after it returns.
	OnEvent func(*Event)
	// OnSafepoint receives each stop of the application's threads (JDK 8
	// -XX:+PrintGCApplicationStoppedTime, -XX:+PrintSafepointStatistics,
	// the unified safepoint tag); the pointer is reused; optional.
	OnSafepoint func(*Safepoint)
	// OnAgeTable receives each tenuring distribution; the pointer is
	// reused; optional.
	OnAgeTable func(*AgeTable)
	// OnPhase receives the logged time of one phase of a pause ("Evacuate
	// Collection Set", "Phase 1: Mark live objects"); optional.
	OnPhase func(name string, d time.Duration)
	// OnStall receives ZGC allocation stalls; optional.
	OnStall func(time.Duration)
	// OnTime receives the stamps of lines that are not events (safepoint
	// lines, the JVM's start-up lines), so that the window covers the
	// whole log; optional.
	OnTime func(uptime float64, wall time.Time)
	// OnJVMStart is called on the lines a JVM writes when it starts ("Using
	// G1", "CommandLine flags:"): uptime going back after one is a restart,
	// not files read out of order; optional.
	OnJVMStart func()

	Stats Stats

	u      unified
	j      jdk8
	ev     Event
	intern map[string]string
	lines  lineReader

	// spName is the operation of the safepoint being logged; age the
	// tenuring table being read.
	spName string
	age    AgeTable
	hasAge bool

	// file and fileLine say where the current line is, for the samples of
	// unreadable records.
	file     string
	fileLine int64
}

// ParseNamed reads r, a file called name, to the end; name only labels
// the line numbers of unreadable records.
func (p *Parser) ParseNamed(name string, r io.Reader) error {
	p.file, p.fileLine = name, 0
	return p.Parse(r)
}

// Parse reads r to the end. Errors are I/O errors only: malformed text is
// counted in Stats, never returned.
func (p *Parser) Parse(r io.Reader) error {
	p.lines.reset(r)
	for {
		pc, err := p.lines.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p.Stats.Bytes += pc.n
		if pc.lineStart {
			p.Stats.Lines++
			p.fileLine++
		}
		switch pc.kind {
		case pieceText:
			p.line(trimEOL(pc.text))
		case pieceLong:
			p.overlong(pc)
		case pieceNUL:
			p.Stats.NULBytes += pc.n
			if len(p.Stats.Skipped) == maxSamples {
				continue // a binary file has a NUL run in every line
			}
			p.skipped(fmt.Sprintf("%s: %d bytes, a hole in the file (a crash, a preallocated file, or copytruncate rotation under a JVM still writing), no text", nulReason, pc.n), nil)
		}
	}
}

// overlong counts a line too long to read. It may hold records (a log whose
// newlines were lost), so it is an unrecognised record too, and the result
// is partial.
func (p *Parser) overlong(pc piece) {
	p.Stats.OverlongLines++
	p.Stats.OverlongBytes += pc.n
	p.Stats.Partial = true
	reason := fmt.Sprintf("a line of %d bytes, longer than the %d KiB a GC log line can be: not read", pc.n, MaxLineBytes>>10)
	if pc.end == endEOF {
		reason = fmt.Sprintf("the file ends inside a line of %d bytes, longer than the %d KiB a GC log line can be, with no newline (cut while being written?): not read", pc.n, MaxLineBytes>>10)
		p.Stats.EndsInsideLine = append(p.Stats.EndsInsideLine, p.file)
	}
	p.unrecognised(p.fileLine, reason, pc.text)
	p.skipped(reason, pc.text)
}

func (p *Parser) skipped(reason string, text []byte) {
	if len(p.Stats.Skipped) < maxSamples {
		p.Stats.Skipped = append(p.Stats.Skipped, RecordSample{File: p.file, Line: p.fileLine, Reason: reason, Text: sampleText(text)})
	}
}

func sampleText(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// Flush emits an event still waiting for its detail lines (a G1 pause at
// the very end of the log) and counts records the log ends inside. Call it
// after the last Parse.
func (p *Parser) Flush() {
	p.j.flushPending(p)
	p.j.dropOpen(p, "the log ends inside this record")
	p.u.dropOpen(p)
	p.flushAges()
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (p *Parser) line(b []byte) {
	if len(b) > 1 && b[0] == '[' && isDecoration(b) {
		p.Stats.UnifiedLines++
		p.unifiedLine(b)
		return
	}
	p.Stats.JDK8Lines++
	p.jdk8Line(b)
}

func (p *Parser) unknown(b []byte) {
	p.Stats.Unknown++
	if len(p.Stats.UnknownSamples) < maxSamples {
		p.Stats.UnknownSamples = append(p.Stats.UnknownSamples, sampleText(b))
	}
}

func (p *Parser) sawTime(up float64, wall time.Time) {
	if p.OnTime != nil && (!math.IsNaN(up) || !wall.IsZero()) {
		p.OnTime(up, wall)
	}
}

func (p *Parser) jvmStart() {
	if p.OnJVMStart != nil {
		p.OnJVMStart()
	}
}

// Position says where the parser is: the file and its line number.
func (p *Parser) Position() (file string, line int64) { return p.file, p.fileLine }

// unrecognised counts a GC record that did not become an event. line is
// where it started (in the current file) and text its first line.
func (p *Parser) unrecognised(line int64, reason string, text []byte) {
	p.Stats.UnrecognisedRecords++
	if len(p.Stats.UnrecognisedSamples) < maxSamples {
		p.Stats.UnrecognisedSamples = append(p.Stats.UnrecognisedSamples, RecordSample{
			File: p.file, Line: line, Reason: reason, Text: sampleText(text),
		})
	}
}

func (p *Parser) emit(e *Event) {
	p.Stats.Events++
	if p.OnEvent != nil {
		p.OnEvent(e)
	}
}

// str interns short, repetitive strings (names, causes) so that events
// cost no allocation once the vocabulary of a log is known. Bounded: a log
// of endless distinct causes stops interning.
func (p *Parser) str(b []byte) string {
	if p.intern == nil {
		p.intern = make(map[string]string)
	}
	if s, ok := p.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(p.intern) < 4096 && len(b) <= 128 {
		p.intern[s] = s
	}
	return s
}

// --- shared lexing helpers ---

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses a decimal at the start of b, accepting ',' as the decimal
// separator (JVMs in some locales write "0,0284337 secs"). n is 0 when b
// does not start with a digit.
func number(b []byte) (v float64, n int) {
	var ip uint64
	i := 0
	for i < len(b) && isDigit(b[i]) {
		if i < 19 {
			ip = ip*10 + uint64(b[i]-'0')
		} else {
			ip *= 10 // beyond 19 digits precision does not matter
		}
		i++
	}
	if i == 0 {
		return 0, 0
	}
	v = float64(ip)
	if i+1 < len(b) && (b[i] == '.' || b[i] == ',') && isDigit(b[i+1]) {
		i++
		var frac uint64
		div := 1.0
		for i < len(b) && isDigit(b[i]) {
			if div < 1e18 {
				frac = frac*10 + uint64(b[i]-'0')
				div *= 10
			}
			i++
		}
		v += float64(frac) / div
	}
	return v, i
}

// size parses "123K", "1.5M", "0B", "15176 K" (CMS's YG occupancy) into
// bytes. Units are binary, as HotSpot prints them.
func size(b []byte) (bytes int64, n int) {
	v, i := number(b)
	if i == 0 {
		return 0, 0
	}
	j := i
	if j < len(b) && b[j] == ' ' && j+1 < len(b) && isUnit(b[j+1]) {
		j++
	}
	if j >= len(b) || !isUnit(b[j]) {
		return 0, 0
	}
	var mult float64
	switch b[j] {
	case 'B':
		mult = 1
	case 'K', 'k':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	}
	f := v * mult
	if f > math.MaxInt64/2 {
		f = math.MaxInt64 / 2
	}
	return int64(f), j + 1
}

func isUnit(c byte) bool {
	return c == 'B' || c == 'K' || c == 'k' || c == 'M' || c == 'G' || c == 'T'
}

// transition finds the first "A->B(C)" (or "A(C0)->B(C)", or ZGC's
// "A(84%)->B(56%)") in b.
func transition(b []byte) (s Space, ok bool) {
	for off := 0; off < len(b); {
		k := bytes.Index(b[off:], []byte("->"))
		if k < 0 {
			return unknownSpace, false
		}
		k += off
		off = k + 2
		// Walk back over "(C0)" and then the size before "->".
		st := k
		if st > 0 && b[st-1] == ')' {
			o := bytes.LastIndexByte(b[:st-1], '(')
			if o < 0 {
				continue
			}
			st = o
		}
		beg := st
		for beg > 0 && (isDigit(b[beg-1]) || b[beg-1] == '.' || b[beg-1] == ',' || isUnit(b[beg-1])) {
			beg--
		}
		before, n := size(b[beg:st])
		if n == 0 || beg+n != st {
			continue
		}
		after, n := size(b[k+2:])
		if n == 0 {
			continue
		}
		s = Space{Before: before, After: after, Capacity: -1}
		rest := b[k+2+n:]
		if len(rest) > 1 && rest[0] == '(' {
			if c, m := size(rest[1:]); m > 0 {
				s.Capacity = c
			}
		}
		return s, true
	}
	return unknownSpace, false
}

// secs finds the last ", N secs" (or "N/M secs", taking the wall time M)
// in b.
func secs(b []byte) (time.Duration, bool) {
	k := lastSec(b)
	if k < 0 {
		return 0, false
	}
	beg := k
	for beg > 0 && (isDigit(b[beg-1]) || b[beg-1] == '.' || b[beg-1] == ',') {
		beg--
	}
	// ',' can be both decimal separator and list separator: "x, 0,01 secs".
	for beg < k && (b[beg] == ',' || b[beg] == '.') {
		beg++
	}
	v, n := number(b[beg:k])
	if n == 0 {
		return 0, false
	}
	return seconds(v), true
}

// lastSec is the index of the last " sec" in b (" secs" included), -1
// when none: scanned from the end, where it almost always is.
func lastSec(b []byte) int {
	for k := len(b) - 4; k >= 0; k-- {
		if b[k] == ' ' && b[k+1] == 's' && b[k+2] == 'e' && b[k+3] == 'c' {
			return k
		}
	}
	return -1
}

func seconds(v float64) time.Duration {
	if v < 0 || v > 1e9 || math.IsNaN(v) {
		return 0
	}
	return time.Duration(math.Round(v * float64(time.Second)))
}

// parenGroups calls fn with the contents of each top-level "(...)" group in
// b whose content starts with a letter (sizes like "(94208K)" are not
// groups). Nested parens ("(System.gc())") stay inside their group.
func parenGroups(b []byte, fn func([]byte)) {
	for i := 0; i < len(b); i++ {
		if b[i] != '(' {
			continue
		}
		depth := 0
		j := i
		for ; j < len(b); j++ {
			if b[j] == '(' {
				depth++
			} else if b[j] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j >= len(b) {
			return
		}
		in := b[i+1 : j]
		if len(in) > 0 && !isDigit(in[0]) {
			fn(in)
		}
		i = j
	}
}

// dateStamp parses an ISO-8601 stamp "2016-04-14T22:30:09.108+0200" at the
// start of b.
func dateStamp(b []byte) (time.Time, int) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, 0
	}
	num := func(s []byte) (int, bool) {
		v := 0
		for _, c := range s {
			if !isDigit(c) {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	y, ok1 := num(b[0:4])
	mo, ok2 := num(b[5:7])
	d, ok3 := num(b[8:10])
	h, ok4 := num(b[11:13])
	mi, ok5 := num(b[14:16])
	s, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
		return time.Time{}, 0
	}
	i := 19
	ns := 0
	if i < len(b) && (b[i] == '.' || b[i] == ',') {
		i++
		scale := 100_000_000
		for i < len(b) && isDigit(b[i]) {
			ns += int(b[i]-'0') * scale
			scale /= 10
			i++
		}
	}
	loc := time.UTC
	if i+3 <= len(b) && (b[i] == '+' || b[i] == '-') {
		neg := b[i] == '-'
		if hh, ok := num(b[i+1 : i+3]); ok {
			j := i + 3
			if j < len(b) && b[j] == ':' {
				j++
			}
			if j+2 <= len(b) {
				if mm, ok := num(b[j : j+2]); ok {
					off := hh*3600 + mm*60
					if neg {
						off = -off
					}
					loc = fixedZone(off)
					i = j + 2
				}
			}
		}
	} else if i < len(b) && b[i] == 'Z' {
		i++
	}
	return time.Date(y, time.Month(mo), d, h, mi, s, ns, loc), i
}

// zones caches one *time.Location per UTC offset: every JDK 8 date stamp
// carries its offset, and building a zone per stamp costs an allocation.
var zones sync.Map

func fixedZone(off int) *time.Location {
	if z, ok := zones.Load(off); ok {
		return z.(*time.Location)
	}
	z, _ := zones.LoadOrStore(off, time.FixedZone("", off))
	return z.(*time.Location)
}
