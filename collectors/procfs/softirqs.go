package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Softirqs is /proc/softirqs: per vector, the number of times each CPU ran
// it since boot. The kernel counts once per handler run in __do_softirq, the
// same place the irq:softirq_entry tracepoint fires.
type Softirqs struct {
	// CPUs are the CPU numbers of the columns (offline CPUs are absent).
	CPUs []int
	// Counts maps a vector name ("NET_RX") to one count per column.
	Counts map[string][]uint64
	// Vectors keeps the file's order of vectors.
	Vectors []string
}

// Softirqs reads /proc/softirqs.
func (fs FS) Softirqs() (Softirqs, error) {
	f, err := fs.Open("/proc/softirqs")
	if err != nil {
		return Softirqs{}, err
	}
	defer f.Close()
	return parseSoftirqs(f)
}

func parseSoftirqs(r io.Reader) (Softirqs, error) {
	s := Softirqs{Counts: map[string][]uint64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024) // one column per CPU: long lines on big hosts
	first := true
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if first {
			first = false
			for _, c := range fields {
				n, err := strconv.Atoi(strings.TrimPrefix(c, "CPU"))
				if err != nil || !strings.HasPrefix(c, "CPU") {
					return s, fmt.Errorf("softirqs header: unexpected column %q", c)
				}
				s.CPUs = append(s.CPUs, n)
			}
			continue
		}
		name := strings.TrimSuffix(fields[0], ":")
		if len(fields)-1 != len(s.CPUs) {
			return s, fmt.Errorf("softirqs %s: %d values for %d CPUs", name, len(fields)-1, len(s.CPUs))
		}
		vals := make([]uint64, len(s.CPUs))
		for i, f := range fields[1:] {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return s, fmt.Errorf("softirqs %s: %w", name, err)
			}
			vals[i] = v
		}
		s.Counts[name] = vals
		s.Vectors = append(s.Vectors, name)
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if len(s.CPUs) == 0 {
		return s, fmt.Errorf("softirqs: empty file")
	}
	return s, nil
}

// ByCPU returns the count of vector on cpu (false if that CPU or vector is
// not listed).
func (s Softirqs) ByCPU(vector string, cpu int) (uint64, bool) {
	vals, ok := s.Counts[vector]
	if !ok {
		return 0, false
	}
	for i, c := range s.CPUs {
		if c == cpu {
			return vals[i], true
		}
	}
	return 0, false
}

// Sub returns s − prev per CPU and vector.
func (s Softirqs) Sub(prev Softirqs) Softirqs {
	d := Softirqs{CPUs: s.CPUs, Vectors: s.Vectors, Counts: map[string][]uint64{}}
	for name, vals := range s.Counts {
		out := make([]uint64, len(vals))
		for i, v := range vals {
			if p, ok := prev.ByCPU(name, s.CPUs[i]); ok && p <= v {
				v -= p
			}
			out[i] = v
		}
		d.Counts[name] = out
	}
	return d
}

// SoftirqsCounter counts every softirq the kernel ran, of every vector on
// every CPU (/proc/softirqs): exact, always counting, the reference the
// overhead budget scales a sampled softirq probe by. It reads one
// /proc/softirqs kept open.
type SoftirqsCounter struct{ r *Rereader }

// OpenSoftirqsCounter opens /proc/softirqs for SoftirqsCounter.Packets,
// reading it once so that a file it cannot parse fails here.
func (fs FS) OpenSoftirqsCounter() (*SoftirqsCounter, error) {
	r, err := fs.OpenRereader("/proc/softirqs")
	if err != nil {
		return nil, err
	}
	c := &SoftirqsCounter{r}
	if _, err := c.Packets(); err != nil {
		r.Close()
		return nil, err
	}
	return c, nil
}

// Packets is the softirqs run so far, every vector and CPU summed (the
// name fits the governor's counter interface).
func (c *SoftirqsCounter) Packets() (uint64, error) {
	b, err := c.r.Read()
	if err != nil {
		return 0, err
	}
	s, err := parseSoftirqs(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/softirqs: %w", err)
	}
	var n uint64
	for _, vals := range s.Counts {
		for _, v := range vals {
			n += v
		}
	}
	return n, nil
}

// Close closes the file.
func (c *SoftirqsCounter) Close() error { return c.r.Close() }
