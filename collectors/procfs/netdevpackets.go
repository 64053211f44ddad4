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

// NetDevPackets is every interface's received plus sent packets in this
// network namespace (/proc/net/dev): exact, always counting, and cheap to
// read, the reference the overhead budget scales sampled counts by.
func (fs FS) NetDevPackets() (uint64, error) {
	f, err := fs.Open("/proc/net/dev")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseNetDevPackets(f)
}

// NetDevCounter reads NetDevPackets from one /proc/net/dev kept open. The
// overhead budget's governor reads it at every switch of a hook group and
// every 25 ms while a window is open: opening and closing the file each
// time was half of what the reads cost perfscope's process during a flood.
// The file stays bound to the network namespace it was opened in.
type NetDevCounter struct {
	f   *os.File
	buf []byte
}

// OpenNetDevCounter opens /proc/net/dev for NetDevCounter.Packets.
func (fs FS) OpenNetDevCounter() (*NetDevCounter, error) {
	f, err := fs.Open("/proc/net/dev")
	if err != nil {
		return nil, err
	}
	return &NetDevCounter{f: f, buf: make([]byte, 4096)}, nil
}

// Packets reads the file again from its start (a seq_file regenerates its
// text at offset 0) and sums as NetDevPackets does.
func (c *NetDevCounter) Packets() (uint64, error) {
	n := 0
	for {
		if n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := c.f.ReadAt(c.buf[n:], int64(n))
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return parseNetDevPackets(bytes.NewReader(c.buf[:n]))
}

// Close closes the file.
func (c *NetDevCounter) Close() error { return c.f.Close() }

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
