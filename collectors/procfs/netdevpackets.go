package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Rereader reads one file again and again through a descriptor kept
// open. The overhead budget's governor reads its reference counters at
// every switch of a hook group and every period: opening and closing
// /proc/net/dev each time was half of what its reads cost perfscope's
// process during a flood. A /proc/net file stays bound to the network
// namespace it was opened in.
type Rereader struct {
	f   *os.File
	buf []byte
}

// OpenRereader opens p (below the root) for Rereader.Read.
func (fs FS) OpenRereader(p string) (*Rereader, error) {
	f, err := fs.Open(p)
	if err != nil {
		return nil, err
	}
	return &Rereader{f: f, buf: make([]byte, 4096)}, nil
}

// Read reads the whole file again from its start (a seq_file regenerates
// its text at offset 0); the bytes are valid until the next Read.
func (r *Rereader) Read() ([]byte, error) {
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := r.f.ReadAt(r.buf[n:], int64(n))
		n += m
		if errors.Is(err, io.EOF) {
			return r.buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Close closes the file.
func (r *Rereader) Close() error { return r.f.Close() }

// NetDevCounter counts every interface's received plus sent packets in
// this network namespace (/proc/net/dev): exact, always counting, and cheap
// to read, the reference the overhead budget scales sampled counts by. It
// reads one /proc/net/dev kept open.
type NetDevCounter struct{ r *Rereader }

// OpenNetDevCounter opens /proc/net/dev for NetDevCounter.Packets.
func (fs FS) OpenNetDevCounter() (*NetDevCounter, error) {
	r, err := fs.OpenRereader("/proc/net/dev")
	if err != nil {
		return nil, err
	}
	return &NetDevCounter{r}, nil
}

// Packets reads the sum again.
func (c *NetDevCounter) Packets() (uint64, error) {
	b, err := c.r.Read()
	if err != nil {
		return 0, err
	}
	return parseNetDevPackets(bytes.NewReader(b))
}

// Close closes the file.
func (c *NetDevCounter) Close() error { return c.r.Close() }

// parseNetDevPackets sums the rx packets (2nd) and tx packets (10th)
// columns after each "iface:".
func parseNetDevPackets(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	var total uint64
	rows := 0
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue // the two header lines
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return 0, fmt.Errorf("/proc/net/dev: %s: want 16 counters, got %d", strings.TrimSpace(name), len(f))
		}
		for _, i := range []int{1, 9} {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/net/dev: %s: %v", strings.TrimSpace(name), err)
			}
			total += n
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if rows == 0 {
		return 0, fmt.Errorf("/proc/net/dev: no interfaces")
	}
	return total, nil
}
