// Package netstat reads the kernel's network counters that locate UDP
// drops and softirq pressure: the Udp and Udp6 groups of /proc/net/snmp and
// snmp6 (RcvbufErrors is Makita's receive-buffer overflow), and
// /proc/net/softnet_stat per CPU (backlog drops, time_squeeze, RPS). All are
// cumulative; read at start and end and use Sub.
package netstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
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

// UDPCounters are the Udp (or Udp6) MIB counters, in datagrams.
type UDPCounters struct {
	InDatagrams  uint64 `json:"in_datagrams"`
	NoPorts      uint64 `json:"no_ports"`
	InErrors     uint64 `json:"in_errors"`
	OutDatagrams uint64 `json:"out_datagrams"`
	// RcvbufErrors counts datagrams dropped because the socket receive
	// buffer was full (also counted in InErrors).
	RcvbufErrors uint64 `json:"rcvbuf_errors"`
	SndbufErrors uint64 `json:"sndbuf_errors"`
	InCsumErrors uint64 `json:"in_csum_errors"`
	MemErrors    uint64 `json:"mem_errors"`
}

// Sub returns c − prev.
func (c UDPCounters) Sub(prev UDPCounters) UDPCounters {
	return UDPCounters{
		InDatagrams: sub(c.InDatagrams, prev.InDatagrams), NoPorts: sub(c.NoPorts, prev.NoPorts),
		InErrors: sub(c.InErrors, prev.InErrors), OutDatagrams: sub(c.OutDatagrams, prev.OutDatagrams),
		RcvbufErrors: sub(c.RcvbufErrors, prev.RcvbufErrors), SndbufErrors: sub(c.SndbufErrors, prev.SndbufErrors),
		InCsumErrors: sub(c.InCsumErrors, prev.InCsumErrors), MemErrors: sub(c.MemErrors, prev.MemErrors),
	}
}

// sub is a − b, or a when the counter was reset (b > a).
func sub(a, b uint64) uint64 {
	if b > a {
		return a
	}
	return a - b
}

func (c *UDPCounters) fields() map[string]*uint64 {
	return map[string]*uint64{
		"InDatagrams": &c.InDatagrams, "NoPorts": &c.NoPorts, "InErrors": &c.InErrors, "OutDatagrams": &c.OutDatagrams,
		"RcvbufErrors": &c.RcvbufErrors, "SndbufErrors": &c.SndbufErrors, "InCsumErrors": &c.InCsumErrors, "MemErrors": &c.MemErrors,
	}
}

// UDPSNMP holds both families. UDP6Known is false when /proc/net/snmp6 is
// absent (IPv6 disabled).
type UDPSNMP struct {
	UDP       UDPCounters `json:"udp"`
	UDP6      UDPCounters `json:"udp6"`
	UDP6Known bool        `json:"udp6_known"`
}

// Sub returns s − prev.
func (s UDPSNMP) Sub(prev UDPSNMP) UDPSNMP {
	return UDPSNMP{UDP: s.UDP.Sub(prev.UDP), UDP6: s.UDP6.Sub(prev.UDP6), UDP6Known: s.UDP6Known}
}

// UDPSNMP reads the Udp group of /proc/net/snmp and the Udp6 counters of
// /proc/net/snmp6.
func (fs FS) UDPSNMP() (UDPSNMP, error) {
	var s UDPSNMP
	f, err := fs.Open("/proc/net/snmp")
	if err != nil {
		return s, err
	}
	s.UDP, err = parseSNMP(f, "Udp")
	f.Close()
	if err != nil {
		return s, fmt.Errorf("/proc/net/snmp: %w", err)
	}
	f, err = fs.Open("/proc/net/snmp6")
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer f.Close()
	if s.UDP6, err = parseSNMP6(f); err != nil {
		return s, fmt.Errorf("/proc/net/snmp6: %w", err)
	}
	s.UDP6Known = true
	return s, nil
}

// parseSNMP reads one group of the header-line/value-line pairs of
// /proc/net/snmp ("Udp: InDatagrams NoPorts ..." then "Udp: 12 0 ...").
func parseSNMP(r io.Reader, group string) (UDPCounters, error) {
	var c UDPCounters
	sc := bufio.NewScanner(r)
	prefix := group + ":"
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != prefix {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		if len(f)-1 != len(names) {
			return c, fmt.Errorf("%s: %d values for %d names", group, len(f)-1, len(names))
		}
		dst := c.fields()
		for i, name := range names {
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return c, fmt.Errorf("%s %s: %w", group, name, err)
			}
			if p, ok := dst[name]; ok {
				*p = v
			}
		}
		return c, nil
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	return c, fmt.Errorf("no %s group", group)
}

// parseSNMP6 reads "Udp6InDatagrams   123" lines.
func parseSNMP6(r io.Reader) (UDPCounters, error) {
	var c UDPCounters
	dst := c.fields()
	sc := bufio.NewScanner(r)
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		name, ok := strings.CutPrefix(f[0], "Udp6")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s: %w", f[0], err)
		}
		if p, ok := dst[name]; ok {
			*p, found = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if !found {
		return c, fmt.Errorf("no Udp6 counters")
	}
	return c, nil
}

// SoftnetCPU is one line of /proc/net/softnet_stat.
type SoftnetCPU struct {
	// CPU is the CPU number: the kernel prints it (column 13) since 5.10;
	// on older kernels it is the line's position, which is only the CPU
	// number when no lower CPU is offline (CPUKnown false then).
	CPU      int  `json:"cpu"`
	CPUKnown bool `json:"cpu_known"`
	// Processed packets taken off this CPU's backlog and processed.
	Processed uint64 `json:"processed"`
	// Dropped packets because the backlog exceeded netdev_max_backlog.
	Dropped uint64 `json:"dropped"`
	// TimeSqueeze counts NET_RX runs that ended with work left because
	// netdev_budget or netdev_budget_usecs ran out.
	TimeSqueeze uint64 `json:"time_squeeze"`
	// ReceivedRPS counts RPS IPIs this CPU received to process packets.
	ReceivedRPS    uint64 `json:"received_rps"`
	FlowLimitCount uint64 `json:"flow_limit_count"`
}

// Softnet reads /proc/net/softnet_stat.
func (fs FS) Softnet() ([]SoftnetCPU, error) {
	f, err := fs.Open("/proc/net/softnet_stat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseSoftnet(f)
}

func parseSoftnet(r io.Reader) ([]SoftnetCPU, error) {
	var out []SoftnetCPU
	sc := bufio.NewScanner(r)
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 11 {
			return nil, fmt.Errorf("softnet_stat line %d: %d columns, want at least 11", line+1, len(f))
		}
		v := make([]uint64, len(f))
		for i, h := range f {
			n, err := strconv.ParseUint(h, 16, 64)
			if err != nil {
				return nil, fmt.Errorf("softnet_stat line %d column %d: %q", line+1, i+1, h)
			}
			v[i] = n
		}
		s := SoftnetCPU{CPU: line, Processed: v[0], Dropped: v[1], TimeSqueeze: v[2], ReceivedRPS: v[9], FlowLimitCount: v[10]}
		if len(v) >= 13 {
			s.CPU, s.CPUKnown = int(v[12]), true
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// SubSoftnet returns cur − prev per CPU (CPUs absent from prev keep their
// absolute counts).
func SubSoftnet(cur, prev []SoftnetCPU) []SoftnetCPU {
	old := map[int]SoftnetCPU{}
	for _, p := range prev {
		old[p.CPU] = p
	}
	out := make([]SoftnetCPU, len(cur))
	for i, c := range cur {
		p := old[c.CPU]
		out[i] = SoftnetCPU{CPU: c.CPU, CPUKnown: c.CPUKnown,
			Processed: sub(c.Processed, p.Processed), Dropped: sub(c.Dropped, p.Dropped), TimeSqueeze: sub(c.TimeSqueeze, p.TimeSqueeze),
			ReceivedRPS: sub(c.ReceivedRPS, p.ReceivedRPS), FlowLimitCount: sub(c.FlowLimitCount, p.FlowLimitCount)}
	}
	return out
}

// UDPSockstat is the UDP line of /proc/net/sockstat: sockets in use (this
// network namespace) and the pages all UDP sockets hold (host-wide, what
// net.ipv4.udp_mem limits).
type UDPSockstat struct {
	InUse    int64 `json:"inuse"`
	MemPages int64 `json:"mem_pages"`
}

// UDPSockstat reads /proc/net/sockstat.
func (fs FS) UDPSockstat() (UDPSockstat, error) {
	f, err := fs.Open("/proc/net/sockstat")
	if err != nil {
		return UDPSockstat{}, err
	}
	defer f.Close()
	return parseSockstat(f)
}

// parseSockstat reads "UDP: inuse 3 mem 12".
func parseSockstat(r io.Reader) (UDPSockstat, error) {
	var s UDPSockstat
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "UDP:" {
			continue
		}
		found := 0
		for i := 1; i+1 < len(f); i += 2 {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("sockstat UDP %s: %w", f[i], err)
			}
			switch f[i] {
			case "inuse":
				s.InUse, found = v, found+1
			case "mem":
				s.MemPages, found = v, found+1
			}
		}
		if found < 2 {
			return s, fmt.Errorf("sockstat: UDP line without inuse and mem: %q", sc.Text())
		}
		return s, nil
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	return s, fmt.Errorf("sockstat: no UDP line")
}

// UDPReadsCounter counts the UDP datagrams read in this network namespace
// (Udp InDatagrams, plus Udp6's when IPv6 is on: the kernel counts a
// datagram there when a socket reads it), from /proc/net/snmp and snmp6
// kept open. The overhead budget scales the sampled socket reads by it.
type UDPReadsCounter struct {
	v4, v6 *procfs.Rereader
}

// OpenUDPReadsCounter opens the files for UDPReadsCounter.Datagrams.
func (fs FS) OpenUDPReadsCounter() (*UDPReadsCounter, error) {
	v4, err := fs.OpenRereader("/proc/net/snmp")
	if err != nil {
		return nil, err
	}
	c := &UDPReadsCounter{v4: v4}
	if c.v6, err = fs.OpenRereader("/proc/net/snmp6"); err != nil && !errors.Is(err, os.ErrNotExist) {
		v4.Close()
		return nil, err
	}
	// Read once, so that a file it cannot parse fails here, not later.
	if _, err := c.Packets(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Packets is the datagrams read so far (the name fits the governor's
// counter interface).
func (c *UDPReadsCounter) Packets() (uint64, error) {
	b, err := c.v4.Read()
	if err != nil {
		return 0, err
	}
	u, err := parseSNMP(bytes.NewReader(b), "Udp")
	if err != nil {
		return 0, fmt.Errorf("/proc/net/snmp: %w", err)
	}
	n := u.InDatagrams
	if c.v6 != nil {
		if b, err = c.v6.Read(); err != nil {
			return 0, err
		}
		u6, err := parseSNMP6(bytes.NewReader(b))
		if err != nil {
			return 0, fmt.Errorf("/proc/net/snmp6: %w", err)
		}
		n += u6.InDatagrams
	}
	return n, nil
}

// Close closes the files.
func (c *UDPReadsCounter) Close() error {
	err := c.v4.Close()
	if c.v6 != nil {
		err = errors.Join(err, c.v6.Close())
	}
	return err
}
