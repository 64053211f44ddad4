package gclog

import "bytes"

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
