package flame

import (
	"hash/fnv"
	"strings"
)

// Kind is what runs a frame: it picks the frame's colour family, the way
// FlameGraph's and async-profiler's palettes do, so that kernel time, JIT
// code and the interpreter stand apart at a glance.
type Kind uint8

const (
	KindNative      Kind = iota // native user code (C, C++, Rust)
	KindKernel                  // "_[k]" or a kernel module
	KindJIT                     // "_[j]": compiled Java (or Java-looking names without annotation)
	KindInlined                 // "_[i]"
	KindInterpreted             // "_[0]": interpreted Java
	KindGo                      // Go functions ("pkg.Func", "path/pkg.(*T).M")
	KindOther                   // the root, thread/process/CPU root frames, [unknown], [module]
)

var kindNames = [...]string{"native", "kernel", "jit", "inlined", "interpreted", "go", "other"}

func (k Kind) String() string { return kindNames[k] }

// KindOf classifies a frame by its name: FlameGraph's annotations first,
// then the shape of Go and Java symbol names.
func KindOf(name string) Kind {
	if len(name) > 4 && name[len(name)-4] == '_' && name[len(name)-3] == '[' && name[len(name)-1] == ']' {
		switch name[len(name)-2] {
		case 'k':
			return KindKernel
		case 'j':
			return KindJIT
		case 'i':
			return KindInlined
		case '0':
			return KindInterpreted
		}
	}
	if name == "" || name[0] == '[' || name == "all" {
		return KindOther
	}
	if strings.Contains(name, "::") || strings.ContainsAny(name, " <") && !strings.Contains(name, "/") {
		return KindNative
	}
	return kindFromQualifiedName(name)
}

// kindFromQualifiedName tells Go from Java by the segment before the
// function: Go qualifies with a lower-case package ("net/http.(*conn).serve",
// "runtime.mallocgc"), Java with an upper-case class after a package of at
// least two segments ("java/util/HashMap.get", "com.example.Foo.bar").
func kindFromQualifiedName(name string) Kind {
	last := name
	slash := strings.LastIndexByte(name, '/')
	if slash >= 0 {
		last = name[slash+1:]
	}
	dot := strings.IndexByte(last, '.')
	if dot <= 0 {
		return KindNative
	}
	if slash >= 0 {
		if isUpper(last[0]) {
			return KindJIT
		}
		return KindGo
	}
	segs := strings.Split(name, ".")
	fn := segs[len(segs)-1]
	lower := 0
	for lower < len(segs)-1 && segs[lower] != "" && !isUpper(segs[lower][0]) && segs[lower][0] != '(' {
		lower++
	}
	switch {
	case lower >= 2 && lower < len(segs)-1 && isUpper(segs[lower][0]):
		return KindJIT
	case lower >= 1 && isIdent(segs[0]) && fn != "" && !isDigit(fn[0]):
		return KindGo
	}
	return KindNative
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// colour is an RGB triple.
type colour struct{ r, g, b uint8 }

// frameColour picks a colour in the kind's family, varied by a hash of the
// name so that one function has the same colour in every graph.
func frameColour(name string) colour {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	a := float64(v&0xff) / 255       // main variation
	b := float64((v>>8)&0xff) / 255  // secondary
	c := float64((v>>16)&0xff) / 255 // tertiary
	mix := func(lo, hi float64, f float64) uint8 { return uint8(lo + (hi-lo)*f) }
	switch KindOf(name) {
	case KindKernel: // orange
		return colour{mix(205, 255, a), mix(110, 165, b), mix(0, 45, c)}
	case KindJIT: // green
		return colour{mix(50, 110, a), mix(175, 230, b), mix(50, 100, c)}
	case KindInlined: // aqua
		return colour{mix(50, 110, a), mix(190, 230, b), mix(190, 230, b)}
	case KindInterpreted: // yellow
		return colour{mix(200, 240, a), mix(200, 240, a), mix(60, 110, c)}
	case KindGo: // blue
		return colour{mix(80, 140, a), mix(150, 200, b), mix(215, 255, c)}
	case KindOther: // grey
		return colour{mix(180, 215, a), mix(180, 215, a), mix(180, 215, a)}
	}
	// native user code: FlameGraph's "hot" red-yellow
	return colour{mix(205, 255, a), mix(50, 180, b), mix(40, 70, c)}
}

// diffColour is red for frames that grew, blue for frames that shrank,
// white for no change; intensity is |delta| relative to the largest change.
func diffColour(delta, maxAbs float64) colour {
	if maxAbs <= 0 || delta == 0 {
		return colour{250, 250, 250}
	}
	f := delta / maxAbs
	if f < 0 {
		f = -f
	}
	if f > 1 {
		f = 1
	}
	fade := uint8(250 - 190*f)
	if delta > 0 {
		return colour{255, fade, fade}
	}
	return colour{fade, fade, 255}
}
