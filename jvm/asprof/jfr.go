package asprof

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// A reader of the JDK Flight Recorder format, enough for async-profiler's
// allocation samples. perfscope needs JFR for one field the collapsed
// output drops: the size of each sampled object (allocationSize), without
// which a sample cannot be weighted without bias (see unbiasedWeight).
// No maintained Go JFR library is available to the project, and the
// format is small: a metadata event declares every type and its fields,
// checkpoint events hold the constant pools (threads, classes, stack
// traces), and events are encoded field by field as the metadata says.
//
// Every chunk is read; a chunk or event that cannot be decoded is an
// error, never skipped: a profile missing samples would be reported as
// a smaller allocation rate.

// jfrType is one type the metadata declares.
type jfrType struct {
	id     int64
	name   string
	fields []jfrField
	// simple is a type with one field, encoded as that field (a
	// "simpleType", such as jdk.types.Symbol in some writers).
	simple bool
}

type jfrField struct {
	name     string
	typeID   int64
	pooled   bool // a constant-pool reference
	array    bool
	typeName string
}

// jfrObject is a decoded struct value: field name → value. Values are
// int64, float64, bool, string (or nil), []any, jfrObject or jfrRef.
type jfrObject map[string]any

// jfrRef is a reference into a constant pool.
type jfrRef struct {
	typeID int64
	key    int64
}

type jfrChunk struct {
	// startNanos (wall clock, ns since the epoch) is the chunk's start,
	// at startTicks; events are timed in ticks of ticksPerSecond.
	startNanos, startTicks, ticksPerSecond int64

	types  map[int64]*jfrType
	byName map[string]*jfrType
	// pools: type id → key → value, read lazily (raw until resolved is
	// not needed: async-profiler's pools are small).
	pools map[int64]map[int64]any
}

// jfrEvent is one event of the types the caller asked for.
type jfrEvent struct {
	typeName string
	fields   jfrObject
	chunk    *jfrChunk
}

type jfrReader struct {
	b   []byte
	pos int
	err error
	// values counts what value decoded: a corrupt type graph (a type
	// whose fields are itself, holding no bytes) would otherwise branch
	// exponentially without reading anything.
	values int
}

func (r *jfrReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("offset %d: %s", r.pos, fmt.Sprintf(format, a...))
	}
}

// varint reads JFR's compressed integer: little-endian groups of 7 bits,
// the ninth byte carrying 8.
func (r *jfrReader) varint() int64 {
	var v uint64
	for i := 0; i < 9; i++ {
		if r.pos >= len(r.b) {
			r.fail("truncated integer")
			return 0
		}
		c := r.b[r.pos]
		r.pos++
		if i == 8 {
			v |= uint64(c) << 56
			break
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			break
		}
	}
	return int64(v)
}

func (r *jfrReader) byte1() byte {
	if r.pos >= len(r.b) {
		r.fail("truncated")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *jfrReader) fixed(n int) []byte {
	if n < 0 || n > len(r.b)-r.pos {
		r.fail("truncated")
		r.pos = len(r.b)
		// Fixed-width callers decode exactly n bytes, so they get zeros
		// rather than a short slice; a negative length gets nothing.
		return make([]byte, max(n, 0))
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

// str reads a JFR string; pooled strings are returned as jfrRef to the
// java.lang.String pool.
func (r *jfrReader) str() any {
	switch enc := r.byte1(); enc {
	case 0:
		return nil
	case 1:
		return ""
	case 2:
		return jfrRef{typeID: -1, key: r.varint()}
	case 3, 5:
		n := r.varint()
		if n < 0 || n > int64(len(r.b)) {
			r.fail("string of %d bytes", n)
			return ""
		}
		b := r.fixed(int(n))
		if enc == 3 {
			return string(b)
		}
		rs := make([]rune, len(b))
		for i, c := range b {
			rs[i] = rune(c)
		}
		return string(rs)
	case 4:
		n := r.varint()
		if n < 0 || n > int64(len(r.b)) {
			r.fail("string of %d chars", n)
			return ""
		}
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = rune(r.varint())
		}
		return string(rs)
	default:
		r.fail("unknown string encoding %d", enc)
		return ""
	}
}

// value decodes one value of type t.
func (c *jfrChunk) value(r *jfrReader, t *jfrType, depth int) any {
	if depth > 32 {
		r.fail("types nested too deeply")
		return nil
	}
	if r.values++; r.values > 16*len(r.b)+4096 {
		r.fail("more values than %d bytes can hold", len(r.b))
		return nil
	}
	switch t.name {
	case "boolean":
		return r.byte1() != 0
	case "byte":
		return int64(int8(r.byte1()))
	case "char", "short", "int", "long":
		return r.varint()
	case "float":
		return float64(math.Float32frombits(binary.BigEndian.Uint32(r.fixed(4))))
	case "double":
		return math.Float64frombits(binary.BigEndian.Uint64(r.fixed(8)))
	case "java.lang.String":
		return r.str()
	}
	obj := jfrObject{}
	for _, f := range t.fields {
		if r.err != nil {
			return obj
		}
		obj[f.name] = c.field(r, f, depth)
	}
	return obj
}

func (c *jfrChunk) field(r *jfrReader, f jfrField, depth int) any {
	one := func() any {
		if f.pooled {
			return jfrRef{typeID: f.typeID, key: r.varint()}
		}
		ft := c.types[f.typeID]
		if ft == nil {
			r.fail("field %s has undeclared type %d", f.name, f.typeID)
			return nil
		}
		return c.value(r, ft, depth+1)
	}
	if !f.array {
		return one()
	}
	n := r.varint()
	if n < 0 || n > int64(len(r.b)-r.pos) {
		r.fail("array of %d elements", n)
		return nil
	}
	out := make([]any, n)
	for i := range out {
		out[i] = one()
	}
	return out
}

// wallNanos turns an event's ticks into wall-clock nanoseconds.
func (c *jfrChunk) wallNanos(ticks int64) int64 {
	return c.startNanos + int64(float64(ticks-c.startTicks)*1e9/float64(c.ticksPerSecond))
}

// resolve follows a constant-pool reference (nil when the pool lacks it).
func (c *jfrChunk) resolve(v any) any {
	for i := 0; i < 4; i++ {
		ref, ok := v.(jfrRef)
		if !ok {
			return v
		}
		if ref.typeID == -1 {
			if t := c.byName["java.lang.String"]; t != nil {
				ref.typeID = t.id
			}
		}
		v = c.pools[ref.typeID][ref.key]
	}
	return v
}

// str is a field's string value, following pools (Symbol objects too).
func (c *jfrChunk) str(v any) string {
	v = c.resolve(v)
	switch x := v.(type) {
	case string:
		return x
	case jfrObject:
		if s, ok := x["string"]; ok {
			return c.str(s)
		}
	}
	return ""
}

func (c *jfrChunk) obj(v any) jfrObject {
	o, _ := c.resolve(v).(jfrObject)
	return o
}

func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	}
	return 0
}

// parseJFR reads every chunk of a recording and calls fn for each event
// whose type is in want.
func parseJFR(b []byte, want map[string]bool, fn func(jfrEvent) error) error {
	if len(b) == 0 {
		return errors.New("empty recording")
	}
	for off := 0; off < len(b); {
		size, err := parseChunk(b[off:], want, fn)
		if err != nil {
			return fmt.Errorf("JFR chunk at %d: %w", off, err)
		}
		off += size
	}
	return nil
}

const jfrHeaderSize = 68

func parseChunk(b []byte, want map[string]bool, fn func(jfrEvent) error) (int, error) {
	if len(b) < jfrHeaderSize || string(b[:4]) != "FLR\x00" {
		return 0, errors.New("not a JFR recording (no FLR magic)")
	}
	if major := binary.BigEndian.Uint16(b[4:]); major != 2 && major != 1 {
		return 0, fmt.Errorf("JFR format version %d is not supported", major)
	}
	size := int64(binary.BigEndian.Uint64(b[8:]))
	metaOff := int64(binary.BigEndian.Uint64(b[24:]))
	if size < jfrHeaderSize || size > int64(len(b)) {
		return 0, fmt.Errorf("chunk size %d of %d bytes: the recording is truncated", size, len(b))
	}
	b = b[:size]
	if metaOff < jfrHeaderSize || metaOff >= size {
		return 0, fmt.Errorf("metadata offset %d outside the chunk", metaOff)
	}
	c := &jfrChunk{types: map[int64]*jfrType{}, byName: map[string]*jfrType{}, pools: map[int64]map[int64]any{},
		startNanos: int64(binary.BigEndian.Uint64(b[32:])), startTicks: int64(binary.BigEndian.Uint64(b[48:])), ticksPerSecond: int64(binary.BigEndian.Uint64(b[56:]))}
	if c.ticksPerSecond <= 0 {
		return 0, fmt.Errorf("%d ticks per second", c.ticksPerSecond)
	}
	if err := c.readMetadata(&jfrReader{b: b, pos: int(metaOff)}); err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	// Constant pools first (async-profiler writes them at the end),
	// then the events.
	var events []int
	for pos := jfrHeaderSize; pos < len(b); {
		r := &jfrReader{b: b, pos: pos}
		n := r.varint()
		typ := r.varint()
		if r.err != nil || n <= 0 || n > int64(len(b)-pos) {
			return 0, fmt.Errorf("event at %d: bad size %d", pos, n)
		}
		switch typ {
		case 0: // metadata, read above
		case 1:
			r.b = b[:pos+int(n)]
			if err := c.readCheckpoint(r); err != nil {
				return 0, fmt.Errorf("constant pool at %d: %w", pos, err)
			}
		default:
			if t := c.types[typ]; t != nil && want[t.name] {
				events = append(events, pos)
			}
		}
		pos += int(n)
	}
	for _, pos := range events {
		r := &jfrReader{b: b, pos: pos}
		n := r.varint()
		t := c.types[r.varint()]
		r.b = b[:pos+int(n)]
		obj, _ := c.value(r, t, 0).(jfrObject)
		if r.err != nil {
			return 0, fmt.Errorf("%s event: %w", t.name, r.err)
		}
		if err := fn(jfrEvent{typeName: t.name, fields: obj, chunk: c}); err != nil {
			return 0, err
		}
	}
	return int(size), nil
}

// jfrElement is a node of the metadata tree.
type jfrElement struct {
	name     string
	attrs    map[string]string
	children []*jfrElement
}

func (c *jfrChunk) readMetadata(r *jfrReader) error {
	r.varint() // size
	if typ := r.varint(); typ != 0 {
		return fmt.Errorf("event type %d at the metadata offset", typ)
	}
	r.varint() // start
	r.varint() // duration
	r.varint() // metadata id
	n := r.varint()
	if n < 0 || n > int64(len(r.b)) {
		return fmt.Errorf("%d strings", n)
	}
	strs := make([]string, n)
	for i := range strs {
		s, _ := r.str().(string)
		strs[i] = s
	}
	lookup := func(i int64) string {
		if i < 0 || i >= int64(len(strs)) {
			r.fail("string index %d of %d", i, len(strs))
			return ""
		}
		return strs[i]
	}
	var element func(depth int) *jfrElement
	element = func(depth int) *jfrElement {
		e := &jfrElement{name: lookup(r.varint()), attrs: map[string]string{}}
		if depth > 16 {
			r.fail("metadata nested too deeply")
			return e
		}
		na := r.varint()
		for i := int64(0); i < na && r.err == nil; i++ {
			k := lookup(r.varint())
			e.attrs[k] = lookup(r.varint())
		}
		nc := r.varint()
		for i := int64(0); i < nc && r.err == nil; i++ {
			e.children = append(e.children, element(depth+1))
		}
		return e
	}
	root := element(0)
	if r.err != nil {
		return r.err
	}
	var classes []*jfrElement
	var walk func(e *jfrElement)
	walk = func(e *jfrElement) {
		if e.name == "class" {
			classes = append(classes, e)
			return
		}
		for _, ch := range e.children {
			walk(ch)
		}
	}
	walk(root)
	for _, e := range classes {
		id, err := strconv.ParseInt(e.attrs["id"], 10, 64)
		if err != nil {
			return fmt.Errorf("class %q without id", e.attrs["name"])
		}
		t := &jfrType{id: id, name: e.attrs["name"], simple: e.attrs["simpleType"] == "true"}
		for _, f := range e.children {
			if f.name != "field" {
				continue
			}
			ft, err := strconv.ParseInt(f.attrs["class"], 10, 64)
			if err != nil {
				return fmt.Errorf("field %s.%s without type", t.name, f.attrs["name"])
			}
			t.fields = append(t.fields, jfrField{name: f.attrs["name"], typeID: ft, pooled: f.attrs["constantPool"] == "true", array: f.attrs["dimension"] == "1"})
		}
		c.types[id] = t
		c.byName[t.name] = t
	}
	for _, t := range c.types {
		for i := range t.fields {
			if ft := c.types[t.fields[i].typeID]; ft != nil {
				t.fields[i].typeName = ft.name
			}
		}
	}
	return nil
}

func (c *jfrChunk) readCheckpoint(r *jfrReader) error {
	r.varint() // start
	r.varint() // duration
	r.varint() // delta to the previous checkpoint
	r.byte1()  // type mask
	pools := r.varint()
	for i := int64(0); i < pools && r.err == nil; i++ {
		tid := r.varint()
		t := c.types[tid]
		if t == nil {
			return fmt.Errorf("pool of undeclared type %d", tid)
		}
		n := r.varint()
		if n < 0 || n > int64(len(r.b)) {
			return fmt.Errorf("pool %s of %d entries", t.name, n)
		}
		m := c.pools[tid]
		if m == nil {
			m = map[int64]any{}
			c.pools[tid] = m
		}
		for j := int64(0); j < n && r.err == nil; j++ {
			key := r.varint()
			m[key] = c.value(r, t, 0)
		}
	}
	return r.err
}
