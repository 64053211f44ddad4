// Package cpuset is the set of CPU numbers in the two text forms the kernel
// uses for them — cpulists ("0-3,8,10-11": Cpus_allowed_list, /sys cpulists)
// and hex cpumasks ("00000000,00010040": rps_cpus, xps_cpus, smp_affinity)
// — and the CPU topology (online CPUs, SMT siblings, NUMA nodes) that
// recommendations about RPS, XPS, IRQ affinity and pinning are computed from.
package cpuset

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds parsed CPU numbers so that a corrupt or hostile input
// ("0-4294967295") cannot make a parser allocate gigabytes. The kernel's
// NR_CPUS tops out at 8192.
const maxCPU = 1 << 14

// Set is an immutable set of CPU numbers. The zero value is the empty set.
// In JSON it is a cpulist string ("0-3,8"), the form users know from /sys.
type Set struct {
	words []uint64 // bit n of words[n/64] is CPU n; no trailing zero words
}

// Of returns the set of the given CPUs.
func Of(cpus ...int) Set {
	var s Set
	for _, c := range cpus {
		if c >= 0 {
			s.add(c)
		}
	}
	return s.trim()
}

// Range returns the CPUs first..last inclusive.
func Range(first, last int) Set {
	var s Set
	for c := first; c <= last; c++ {
		s.add(c)
	}
	return s.trim()
}

func (s *Set) add(c int) {
	for len(s.words) <= c/64 {
		s.words = append(s.words, 0)
	}
	s.words[c/64] |= 1 << (c % 64)
}

func (s Set) trim() Set {
	n := len(s.words)
	for n > 0 && s.words[n-1] == 0 {
		n--
	}
	s.words = s.words[:n]
	return s
}

// Contains reports whether cpu is in s.
func (s Set) Contains(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.words) {
		return false
	}
	return s.words[cpu/64]&(1<<(cpu%64)) != 0
}

// Len is the number of CPUs in s.
func (s Set) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether s has no CPU.
func (s Set) IsEmpty() bool { return len(s.words) == 0 }

// CPUs lists the CPU numbers in ascending order.
func (s Set) CPUs() []int {
	out := make([]int, 0, s.Len())
	for i, w := range s.words {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// Max is the highest CPU in s, or -1 when s is empty.
func (s Set) Max() int {
	if len(s.words) == 0 {
		return -1
	}
	last := len(s.words) - 1
	return last*64 + 63 - bits.LeadingZeros64(s.words[last])
}

// Equal reports whether s and o hold the same CPUs.
func (s Set) Equal(o Set) bool { return slices.Equal(s.words, o.words) }

func combine(a, b Set, op func(x, y uint64) uint64) Set {
	n := max(len(a.words), len(b.words))
	out := Set{words: make([]uint64, n)}
	for i := range n {
		var x, y uint64
		if i < len(a.words) {
			x = a.words[i]
		}
		if i < len(b.words) {
			y = b.words[i]
		}
		out.words[i] = op(x, y)
	}
	return out.trim()
}

// Union is s ∪ o.
func (s Set) Union(o Set) Set { return combine(s, o, func(x, y uint64) uint64 { return x | y }) }

// Intersect is s ∩ o.
func (s Set) Intersect(o Set) Set { return combine(s, o, func(x, y uint64) uint64 { return x & y }) }

// Difference is s − o.
func (s Set) Difference(o Set) Set { return combine(s, o, func(x, y uint64) uint64 { return x &^ y }) }

// IsSubset reports whether every CPU of s is in o.
func (s Set) IsSubset(o Set) bool { return s.Difference(o).IsEmpty() }

// ParseList parses a cpulist: comma-separated CPUs and inclusive ranges
// ("0-3,8,10-11"); the empty string (and a lone newline) is the empty set.
// The kernel's stride form "0-15:2/4" (used in boot parameters, never
// printed by /proc or /sys) is accepted too so that user input round-trips.
func ParseList(text string) (Set, error) {
	text = strings.TrimSpace(text)
	var s Set
	if text == "" {
		return s, nil
	}
	for _, part := range strings.Split(text, ",") {
		if err := s.addListPart(strings.TrimSpace(part)); err != nil {
			return Set{}, fmt.Errorf("cpulist %q: %w", text, err)
		}
	}
	return s.trim(), nil
}

func (s *Set) addListPart(part string) error {
	rng, stride, hasStride := strings.Cut(part, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	first, err := parseCPU(lo)
	if err != nil {
		return err
	}
	last := first
	if isRange {
		if last, err = parseCPU(hi); err != nil {
			return err
		}
		if last < first {
			return fmt.Errorf("range %q runs backwards", part)
		}
	}
	used, group := 1, 1
	if hasStride {
		u, g, ok := strings.Cut(stride, "/")
		used, err = strconv.Atoi(u)
		if err == nil && ok {
			group, err = strconv.Atoi(g)
		}
		if err != nil || !ok || used < 1 || group < used {
			return fmt.Errorf("bad stride %q (want used/group, e.g. 2/4)", stride)
		}
	}
	for c := first; c <= last; c++ {
		if (c-first)%group < used {
			s.add(c)
		}
	}
	return nil
}

func parseCPU(text string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(text))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad CPU number %q", text)
	}
	if n >= maxCPU {
		return 0, fmt.Errorf("CPU %d beyond the kernel's limit of %d", n, maxCPU)
	}
	return n, nil
}

// MustParseList is ParseList for constants in tests and tables; it panics on
// a malformed list.
func MustParseList(text string) Set {
	s, err := ParseList(text)
	if err != nil {
		panic(err)
	}
	return s
}

// List formats s as a cpulist with ranges, as the kernel prints it ("0-3,8").
// The empty set is "".
func (s Set) List() string {
	var b strings.Builder
	cpus := s.CPUs()
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// String is the cpulist form.
func (s Set) String() string { return s.List() }

// ParseMask parses a hex cpumask. The kernel prints comma-separated 32-bit
// words, most significant first ("00000000,00010040"); users usually write
// one hex number ("10040", "0x3"). Both are accepted, as the kernel accepts
// both on write. An all-zero mask is the empty set (RPS/XPS off).
func ParseMask(text string) (Set, error) {
	text = strings.TrimSpace(text)
	text = strings.TrimPrefix(strings.TrimPrefix(text, "0x"), "0X")
	if text == "" {
		return Set{}, fmt.Errorf("cpumask: empty")
	}
	var groups []string
	if strings.Contains(text, ",") {
		groups = strings.Split(text, ",")
	} else {
		// One long number: cut it into 32-bit words from the right.
		for len(text) > 8 {
			groups = append([]string{text[len(text)-8:]}, groups...)
			text = text[:len(text)-8]
		}
		groups = append([]string{text}, groups...)
	}
	var s Set
	for i, g := range groups {
		if g == "" || len(g) > 8 {
			return Set{}, fmt.Errorf("cpumask %q: word %q is not 1-8 hex digits", text, g)
		}
		w, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return Set{}, fmt.Errorf("cpumask %q: word %q is not hex", text, g)
		}
		base := (len(groups) - 1 - i) * 32
		for w != 0 {
			b := bits.TrailingZeros64(w)
			if base+b >= maxCPU {
				return Set{}, fmt.Errorf("cpumask %q: CPU %d beyond the kernel's limit", text, base+b)
			}
			s.add(base + b)
			w &^= 1 << b
		}
	}
	return s.trim(), nil
}

// MustParseMask is ParseMask for constants; it panics on a malformed mask.
func MustParseMask(text string) Set {
	s, err := ParseMask(text)
	if err != nil {
		panic(err)
	}
	return s
}

// Mask formats s as the kernel prints a cpumask of nrCPUs bits
// (nr_cpu_ids): comma-separated 32-bit words, most significant first, the
// first word only as wide as the bits it covers ("3" on 2 CPUs,
// "000000ff,ffffffff" on 40). nrCPUs ≤ 0, or smaller than the highest CPU in
// s, uses the narrowest width that holds s. The kernel accepts this form
// when it is written back to rps_cpus, xps_cpus or smp_affinity.
func (s Set) Mask(nrCPUs int) string {
	if need := max(s.Max()+1, 1); nrCPUs < need {
		nrCPUs = need
	}
	nWords := (nrCPUs + 31) / 32
	parts := make([]string, 0, nWords)
	for i := nWords - 1; i >= 0; i-- {
		w := s.words32(i)
		width := 8
		if i == nWords-1 {
			if rem := nrCPUs - i*32; rem < 32 {
				width = (rem + 3) / 4
			}
		}
		parts = append(parts, fmt.Sprintf("%0*x", width, w))
	}
	return strings.Join(parts, ",")
}

func (s Set) words32(i int) uint32 {
	if i/2 >= len(s.words) {
		return 0
	}
	return uint32(s.words[i/2] >> (32 * (i % 2)))
}

// MarshalJSON writes the cpulist string.
func (s Set) MarshalJSON() ([]byte, error) { return json.Marshal(s.List()) }

// UnmarshalJSON reads a cpulist string, so that saved reports can be
// compared.
func (s *Set) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		return fmt.Errorf("cpuset: want a cpulist string: %w", err)
	}
	v, err := ParseList(text)
	if err != nil {
		return err
	}
	*s = v
	return nil
}
