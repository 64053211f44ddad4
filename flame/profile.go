// Package flame is perfscope's stack model and its flame graph renderers.
//
// A Profile is a trie of root-first frames whose nodes carry an inclusive
// and a self value in one unit (samples, nanoseconds or bytes). Readers fill
// it from folded stacks (FlameGraph, async-profiler collapsed), `perf
// script` output and pprof; writers emit an interactive self-contained SVG
// or HTML flame graph, folded stacks, pprof protobuf and speedscope JSON.
// Diff compares two profiles in the shape of either.
//
// The trie is built for speed on large inputs: frame names are interned
// once, nodes live in one flat slice without pointers (so the garbage
// collector never scans them), and renderers prune frames narrower than the
// minimum width before they are emitted.
package flame

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/perfscope/perfscope/base/safeio"
)

// Unit is what a profile's values count.
type Unit string

const (
	Samples     Unit = "samples"
	Nanoseconds Unit = "nanoseconds"
	// Microseconds is the unit of off-CPU profiles: bcc's offcputime -f
	// writes folded stacks whose values are microseconds off CPU, and
	// perfscope's folded output keeps that convention.
	Microseconds Unit = "microseconds"
	Bytes        Unit = "bytes"
)

// ParseUnit accepts the names Unit values print as.
func ParseUnit(s string) (Unit, error) {
	switch Unit(s) {
	case Samples, Nanoseconds, Microseconds, Bytes:
		return Unit(s), nil
	}
	return "", fmt.Errorf("unknown unit %q (want samples, nanoseconds, microseconds or bytes)", s)
}

// node is one frame in the trie. Children form a singly linked list
// (firstChild → nextSibling); wide nodes are additionally indexed in
// Profile.wide so that lookups stay O(1) for hubs such as the root.
type node struct {
	name        uint32
	nchild      uint32
	firstChild  int32
	nextSibling int32
	total       int64 // inclusive: this frame and everything it called
	self        int64 // samples whose leaf is this frame
}

// wideFanout is the child count above which a node's children are looked up
// through the map instead of by walking the sibling list.
const wideFanout = 8

const noNode = -1

// Profile is a set of stacks with values, merged into a trie.
type Profile struct {
	Unit Unit
	// SampleType names what the values measure, as pprof's sample type
	// does ("off-cpu"); empty: what the unit implies ("cpu" for
	// nanoseconds, "space" for bytes, "samples" for counts).
	SampleType string

	names []string          // interned frame names, by id
	ids   map[string]uint32 // name → id
	// chunks hold the nodes, node n at chunks[n>>chunkBits][n&chunkMask];
	// node 0 is the synthetic root ("all"). Fixed-size chunks never move,
	// so growing the trie neither copies it nor leaves the old copy for
	// the garbage collector, which halves peak memory on large inputs.
	chunks [][]node
	count  int32
	wide   map[uint64]int32 // (parent<<32 | name) → child, for nodes with > wideFanout children
	// nameBytes is the length of all interned names, for Bytes.
	nameBytes int64
	// refused is why Add first refused a stack (ErrOverflow, ErrTooDeep):
	// readers return it rather than draw a graph with a wrapped total or
	// silently missing stacks.
	refused error
}

// MaxDepth is the deepest stack a profile accepts. Renderers walk the trie
// recursively; a hostile input with millions of frames on one line would
// otherwise exhaust the goroutine stack, which no recover can catch.
// Real profilers stop far below it (perf at 127 frames by default,
// async-profiler at 2048, the JVM's own limit at 1024 by default).
const MaxDepth = 1 << 16

// MaxFrames caps the distinct frames (trie nodes) of one profile: 2^26
// nodes are 2 GiB of trie. MaxBytes is usually the tighter bound.
var MaxFrames int32 = 1 << 26

// MaxBytes caps the memory one profile's trie may take: its nodes, its
// interned frame names and the index of wide nodes, as counted by
// Profile.Bytes. Readers stream their input, so the trie is what grows
// with it: a 2 GB folded file of 4.4 M mostly distinct stacks needs about
// 2 GB of trie, and a file of unique frame names as much as the file.
// Past the cap a reader fails with ErrTooLarge at the line it reached,
// never draws part of the input. The CLI sets it from --max-memory.
var MaxBytes int64 = 1 << 30

// Memory taken per node, per interned name beyond its bytes (its string
// header, the name → id map entry) and per entry of the wide-node index,
// measured with a heap profile of large inputs.
const (
	nodeBytes      = 32
	nameBytes      = 64
	wideEntryBytes = 24
)

var (
	// ErrTooManyFrames is returned for a profile past MaxFrames.
	ErrTooManyFrames = errors.New("too many distinct frames")
	// ErrOverflow is returned when values add up past what an int64 holds.
	ErrOverflow = errors.New("values add up to more than 2^63-1")
	// ErrTooDeep is returned for a stack deeper than MaxDepth frames.
	ErrTooDeep = fmt.Errorf("stack deeper than %d frames", MaxDepth)
)

// tooLarge is the error for a profile past MaxBytes, with its size.
type tooLarge struct {
	frames, names int
	max           int64
}

func (e *tooLarge) Error() string {
	return fmt.Sprintf("the profile needs more than %s of memory (%d distinct frames, %d distinct names so far); "+
		"perfscope stops rather than draw part of it", safeio.FormatSize(e.max), e.frames, e.names)
}

func (e *tooLarge) Unwrap() error { return ErrTooLarge }

// fits reports whether adding v to p's total stays within int64: every
// node's total is at most the root's, so checking the root is enough.
func (p *Profile) fits(v int64) bool { return v <= math.MaxInt64-p.node(0).total }

// Err reports the first stack Add had to refuse (ErrOverflow, ErrTooDeep),
// so that a profile built from untrusted input never reports a wrapped
// total or quietly lacks stacks.
func (p *Profile) Err() error { return p.refused }

const (
	chunkBits = 16
	chunkMask = 1<<chunkBits - 1
)

// node returns node n; the pointer stays valid while the trie grows.
func (p *Profile) node(n int32) *node { return &p.chunks[n>>chunkBits][n&chunkMask] }

// newNode appends a node and returns its index.
func (p *Profile) newNode(v node) int32 {
	n := p.count
	if int(n>>chunkBits) == len(p.chunks) {
		p.chunks = append(p.chunks, make([]node, 1<<chunkBits))
	}
	p.chunks[n>>chunkBits][n&chunkMask] = v
	p.count++
	return n
}

// New returns an empty profile counting unit (samples if empty).
func New(unit Unit) *Profile {
	if unit == "" {
		unit = Samples
	}
	p := &Profile{
		Unit:  unit,
		ids:   make(map[string]uint32),
		wide:  make(map[uint64]int32),
		names: []string{"all"}, // id 0 is the root; never interned, so a frame may be named "all"
	}
	p.newNode(node{firstChild: noNode, nextSibling: noNode})
	return p
}

// Add adds value to the stack frames (root first). Empty frame lists and
// non-positive values are ignored: they carry no width. A value that would
// overflow the total, or a stack deeper than MaxDepth, is refused and
// reported by Err.
func (p *Profile) Add(frames []string, value int64) {
	if len(frames) == 0 || value <= 0 {
		return
	}
	if !p.fits(value) || len(frames) > MaxDepth {
		if p.refused == nil {
			p.refused = ErrOverflow
			if len(frames) > MaxDepth {
				p.refused = ErrTooDeep
			}
		}
		return
	}
	n := int32(0)
	p.node(0).total += value
	for _, f := range frames {
		n = p.child(n, p.intern(f))
		p.node(n).total += value
	}
	p.node(n).self += value
}

// Total is the sum of all stacks' values.
func (p *Profile) Total() int64 { return p.node(0).total }

// Bytes is the memory the profile's trie takes, as MaxBytes counts it.
func (p *Profile) Bytes() int64 {
	return int64(p.count)*nodeBytes + p.nameBytes + int64(len(p.names))*nameBytes + int64(len(p.wide))*wideEntryBytes
}

// Frames is the number of distinct frames (trie nodes, without the root).
func (p *Profile) Frames() int { return int(p.count) - 1 }

// intern returns name's id, adding it if new.
func (p *Profile) intern(name string) uint32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := uint32(len(p.names))
	name = strings.Clone(name) // callers may pass views into a reused buffer
	p.names = append(p.names, name)
	p.ids[name] = id
	p.nameBytes += int64(len(name))
	return id
}

// internBytes is intern without allocating for names already seen: the
// map lookup with string(b) does not copy.
func (p *Profile) internBytes(b []byte) uint32 {
	if id, ok := p.ids[string(b)]; ok {
		return id
	}
	return p.intern(string(b))
}

// child returns parent's child named name, creating it if absent.
func (p *Profile) child(parent int32, name uint32) int32 {
	pn := p.node(parent)
	if pn.nchild > wideFanout {
		if c, ok := p.wide[uint64(parent)<<32|uint64(name)]; ok {
			return c
		}
	} else {
		for c := pn.firstChild; c != noNode; {
			cn := p.node(c)
			if cn.name == name {
				return c
			}
			c = cn.nextSibling
		}
	}
	if p.count > MaxFrames || p.Bytes() > MaxBytes {
		// Refused: the stack collapses into its parent, and the reader
		// returns the error instead of the profile.
		if p.refused == nil {
			p.refused = ErrTooManyFrames
			if p.count <= MaxFrames {
				p.refused = &tooLarge{frames: p.Frames(), names: len(p.names) - 1, max: MaxBytes}
			}
		}
		return parent
	}
	c := p.newNode(node{name: name, firstChild: noNode, nextSibling: pn.firstChild})
	pn.firstChild = c
	pn.nchild++
	switch {
	case pn.nchild == wideFanout+1:
		for s := pn.firstChild; s != noNode; s = p.node(s).nextSibling {
			p.wide[uint64(parent)<<32|uint64(p.node(s).name)] = s
		}
	case pn.nchild > wideFanout+1:
		p.wide[uint64(parent)<<32|uint64(name)] = c
	}
	return c
}

// lookup returns parent's child named name, or noNode.
func (p *Profile) lookup(parent int32, name string) int32 {
	id, ok := p.ids[name]
	if !ok {
		return noNode
	}
	if p.node(parent).nchild > wideFanout {
		if c, ok := p.wide[uint64(parent)<<32|uint64(id)]; ok {
			return c
		}
		return noNode
	}
	for c := p.node(parent).firstChild; c != noNode; c = p.node(c).nextSibling {
		if p.node(c).name == id {
			return c
		}
	}
	return noNode
}

// sortedChildren appends n's children ordered by name (FlameGraph's
// alphabetical order, which keeps graphs of similar profiles comparable).
func (p *Profile) sortedChildren(dst []int32, n int32) []int32 {
	start := len(dst)
	for c := p.node(n).firstChild; c != noNode; c = p.node(c).nextSibling {
		dst = append(dst, c)
	}
	sortByName(p, dst[start:])
	return dst
}

// Walk calls fn for every stack with a self value, root first, in
// alphabetical order of frames. The frames slice is reused between calls.
func (p *Profile) Walk(fn func(frames []string, value int64) error) error {
	var frames []string
	var walk func(n int32) error
	var kidsBuf []int32
	walk = func(n int32) error {
		if n != 0 {
			frames = append(frames, p.names[p.node(n).name])
			defer func() { frames = frames[:len(frames)-1] }()
			if s := p.node(n).self; s > 0 {
				if err := fn(frames, s); err != nil {
					return err
				}
			}
		}
		start := len(kidsBuf)
		kidsBuf = p.sortedChildren(kidsBuf, n)
		kids := slices.Clone(kidsBuf[start:])
		kidsBuf = kidsBuf[:start]
		for _, c := range kids {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(0)
}

// Merge adds every stack of q to p. Units must match: adding nanoseconds
// to samples would draw a meaningless graph.
func (p *Profile) Merge(q *Profile) error {
	if p.Unit != q.Unit {
		return fmt.Errorf("cannot merge a profile in %s into one in %s", q.Unit, p.Unit)
	}
	if q.refused != nil {
		return q.refused
	}
	if !p.fits(q.node(0).total) {
		return ErrOverflow
	}
	p.node(0).total += q.node(0).total
	p.node(0).self += q.node(0).self
	p.mergeChildren(0, q, 0)
	return p.refused
}

func (p *Profile) mergeChildren(pn int32, q *Profile, qn int32) {
	for qc := q.node(qn).firstChild; qc != noNode; qc = q.node(qc).nextSibling {
		c := p.child(pn, p.intern(q.names[q.node(qc).name]))
		p.node(c).total += q.node(qc).total
		p.node(c).self += q.node(qc).self
		p.mergeChildren(c, q, qc)
	}
}
