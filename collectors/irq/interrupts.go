// Package irq reads interrupt counters and placement: /proc/interrupts (per
// IRQ and CPU), /proc/irq/N affinities (smp_affinity, effective_affinity,
// affinity_hint, node), the mapping of a NIC's IRQ names to its queues, and
// whether irqbalance runs and with which options. Makita's first steps
// (softirq on one NUMA node only, irqbalance ignoring affinity_hint) are
// found from these.
package irq

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// FS reads below a root ("/" live, a fixture in tests).
type FS struct{ procfs.FS }

// NewFS reads below root.
func NewFS(root string) FS { return FS{procfs.FS{Root: root}} }

// Default reads the live system.
var Default = NewFS("/")

// Line is one row of /proc/interrupts.
type Line struct {
	// ID is the IRQ number as text ("38") or the architecture's label for
	// non-device interrupts ("LOC", "NMI").
	ID string `json:"id"`
	// IRQ is the number, -1 for labelled rows.
	IRQ int `json:"irq"`
	// Counts has one count per column of Interrupts.CPUs.
	Counts []uint64 `json:"counts"`
	// Chip and HWIRQ describe the controller ("PCI-MSIX-0000:00:03.0",
	// "1-edge"); empty for labelled rows.
	Chip  string `json:"chip,omitempty"`
	HWIRQ string `json:"hwirq,omitempty"`
	// Name is the handler names ("virtio2-input.0", "ens1f0-TxRx-3") or the
	// description of a labelled row.
	Name string `json:"name"`
}

// Actions splits Name into the handlers sharing the IRQ ("i8042, ttyS0").
func (l Line) Actions() []string {
	var out []string
	for _, a := range strings.Split(l.Name, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Total is the sum over CPUs.
func (l Line) Total() uint64 {
	var t uint64
	for _, c := range l.Counts {
		t += c
	}
	return t
}

// Interrupts is /proc/interrupts.
type Interrupts struct {
	// CPUs are the CPU numbers of the count columns (online CPUs only).
	CPUs  []int  `json:"cpus"`
	Lines []Line `json:"lines"`
}

// Interrupts reads /proc/interrupts.
func (fs FS) Interrupts() (Interrupts, error) {
	f, err := fs.Open("/proc/interrupts")
	if err != nil {
		return Interrupts{}, err
	}
	defer f.Close()
	return parseInterrupts(f)
}

func parseInterrupts(r io.Reader) (Interrupts, error) {
	var in Interrupts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return in, err
		}
		return in, fmt.Errorf("interrupts: empty file")
	}
	for _, col := range strings.Fields(sc.Text()) {
		n, err := strconv.Atoi(strings.TrimPrefix(col, "CPU"))
		if err != nil || !strings.HasPrefix(col, "CPU") {
			return in, fmt.Errorf("interrupts header: unexpected column %q", col)
		}
		in.CPUs = append(in.CPUs, n)
	}
	if len(in.CPUs) == 0 {
		return in, fmt.Errorf("interrupts: header lists no CPU")
	}
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		id, ok := strings.CutSuffix(fields[0], ":")
		if !ok {
			return in, fmt.Errorf("interrupts: line %q has no IRQ label", sc.Text())
		}
		l := Line{ID: id, IRQ: -1}
		if n, err := strconv.Atoi(id); err == nil {
			l.IRQ = n
		}
		rest := fields[1:]
		// ERR and MIS carry one system-wide count, not one per CPU.
		for len(l.Counts) < len(in.CPUs) && len(rest) > 0 {
			v, err := strconv.ParseUint(rest[0], 10, 64)
			if err != nil {
				break
			}
			l.Counts = append(l.Counts, v)
			rest = rest[1:]
		}
		if l.IRQ >= 0 {
			if len(l.Counts) != len(in.CPUs) {
				return in, fmt.Errorf("interrupts: IRQ %d has %d counts for %d CPUs", l.IRQ, len(l.Counts), len(in.CPUs))
			}
			l.Chip, l.HWIRQ, l.Name = splitDescription(rest)
		} else {
			l.Name = strings.Join(rest, " ")
		}
		in.Lines = append(in.Lines, l)
	}
	return in, sc.Err()
}

// splitDescription separates "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0"
// (or "IR-PCI-MSI 1572864-edge ens1f0-TxRx-0", or ARM's "GICv3 27 Level
// arch_timer") into chip, hwirq and handler names: the handlers follow the
// trigger type, the last token naming edge or level.
func splitDescription(tokens []string) (chip, hwirq, name string) {
	trigger := -1
	for i, tok := range tokens {
		lower := strings.ToLower(tok)
		if strings.HasSuffix(lower, "edge") || strings.HasSuffix(lower, "level") || strings.HasSuffix(lower, "fasteoi") {
			trigger = i
		}
	}
	if trigger < 0 {
		if len(tokens) == 0 {
			return "", "", ""
		}
		return tokens[0], "", strings.Join(tokens[1:], " ")
	}
	// "1-edge" is one token; ARM prints the number and "Level" apart.
	start := trigger
	if !strings.Contains(tokens[trigger], "-") && trigger >= 1 {
		start = trigger - 1
	}
	return strings.Join(tokens[:start], " "), strings.Join(tokens[start:trigger+1], " "), strings.Join(tokens[trigger+1:], " ")
}

// Line returns the row of irq.
func (in Interrupts) Line(irq int) (Line, bool) {
	for _, l := range in.Lines {
		if l.IRQ == irq {
			return l, true
		}
	}
	return Line{}, false
}

// CountOn returns the count of irq on cpu.
func (in Interrupts) CountOn(irq, cpu int) (uint64, bool) {
	l, ok := in.Line(irq)
	if !ok {
		return 0, false
	}
	for i, c := range in.CPUs {
		if c == cpu && i < len(l.Counts) {
			return l.Counts[i], true
		}
	}
	return 0, false
}

// Sub returns in − prev per row and CPU (rows or CPUs missing from prev keep
// their absolute counts; counters that went backwards, e.g. after a CPU was
// re-onlined, count from zero).
func (in Interrupts) Sub(prev Interrupts) Interrupts {
	idx := map[string]Line{}
	for _, l := range prev.Lines {
		idx[l.ID] = l
	}
	prevCol := map[int]int{}
	for i, c := range prev.CPUs {
		prevCol[c] = i
	}
	d := Interrupts{CPUs: in.CPUs}
	for _, l := range in.Lines {
		out := l
		out.Counts = make([]uint64, len(l.Counts))
		p, havePrev := idx[l.ID]
		for i, v := range l.Counts {
			if havePrev && i < len(in.CPUs) {
				if j, ok := prevCol[in.CPUs[i]]; ok && j < len(p.Counts) && p.Counts[j] <= v {
					v -= p.Counts[j]
				}
			}
			out.Counts[i] = v
		}
		d.Lines = append(d.Lines, out)
	}
	return d
}
