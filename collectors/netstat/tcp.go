package netstat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// TCPCounters are the TCP counters of one network namespace that locate
// where TCP segments and connections are lost or wait: the Tcp group of
// /proc/net/snmp (shared by IPv4 and IPv6) and the TcpExt group of
// /proc/net/netstat, under the kernel's names as nstat prints them
// (TcpRetransSegs, TcpExtListenOverflows). All are cumulative; read at
// start and end and use Sub.
type TCPCounters struct {
	// Tcp (RFC 4022 MIB) from /proc/net/snmp.
	ActiveOpens  uint64 `json:"active_opens" mib:"Tcp.ActiveOpens"`
	PassiveOpens uint64 `json:"passive_opens" mib:"Tcp.PassiveOpens"`
	AttemptFails uint64 `json:"attempt_fails" mib:"Tcp.AttemptFails"`
	EstabResets  uint64 `json:"estab_resets" mib:"Tcp.EstabResets"`
	InSegs       uint64 `json:"in_segs" mib:"Tcp.InSegs"`
	OutSegs      uint64 `json:"out_segs" mib:"Tcp.OutSegs"`
	// RetransSegs counts retransmitted segments (a GSO packet counts its
	// segments).
	RetransSegs uint64 `json:"retrans_segs" mib:"Tcp.RetransSegs"`
	InErrs      uint64 `json:"in_errs" mib:"Tcp.InErrs"`
	// OutRsts counts RST segments sent.
	OutRsts uint64 `json:"out_rsts" mib:"Tcp.OutRsts"`

	// Accept queue: ListenOverflows counts SYNs and final ACKs a listener
	// refused because its accept queue was full; ListenDrops counts them
	// plus every other drop at a listener (it includes ListenOverflows).
	ListenOverflows uint64 `json:"listen_overflows" mib:"TcpExt.ListenOverflows"`
	ListenDrops     uint64 `json:"listen_drops" mib:"TcpExt.ListenDrops"`
	// SYN queue: TCPReqQFullDrop counts SYNs dropped because the SYN
	// queue was full and cookies were off; TCPReqQFullDoCookies, SYNs
	// answered with a cookie because it was full. Syncookies* count
	// cookies sent, valid cookies received and invalid ones.
	TCPReqQFullDrop      uint64 `json:"req_q_full_drop" mib:"TcpExt.TCPReqQFullDrop"`
	TCPReqQFullDoCookies uint64 `json:"req_q_full_do_cookies" mib:"TcpExt.TCPReqQFullDoCookies"`
	SyncookiesSent       uint64 `json:"syncookies_sent" mib:"TcpExt.SyncookiesSent"`
	SyncookiesRecv       uint64 `json:"syncookies_recv" mib:"TcpExt.SyncookiesRecv"`
	SyncookiesFailed     uint64 `json:"syncookies_failed" mib:"TcpExt.SyncookiesFailed"`

	// Socket backlog (segments arriving while a thread owns the socket):
	// dropped because the backlog exceeded sk_rcvbuf + sk_sndbuf.
	TCPBacklogDrop uint64 `json:"backlog_drop" mib:"TcpExt.TCPBacklogDrop"`
	// Receive queue under memory pressure: PruneCalled counts prune runs
	// (the queue was over sk_rcvbuf), TCPRcvCollapsed the skbs merged to
	// save memory, RcvPruned the segments dropped after pruning failed,
	// OfoPruned out-of-order segments dropped, TCPRcvQDrop segments
	// dropped because the receive queue could not take them.
	PruneCalled       uint64 `json:"prune_called" mib:"TcpExt.PruneCalled"`
	RcvPruned         uint64 `json:"rcv_pruned" mib:"TcpExt.RcvPruned"`
	OfoPruned         uint64 `json:"ofo_pruned" mib:"TcpExt.OfoPruned"`
	TCPRcvCollapsed   uint64 `json:"rcv_collapsed" mib:"TcpExt.TCPRcvCollapsed"`
	TCPRcvQDrop       uint64 `json:"rcv_q_drop" mib:"TcpExt.TCPRcvQDrop"`
	TCPOFODrop        uint64 `json:"ofo_drop" mib:"TcpExt.TCPOFODrop"`
	TCPZeroWindowDrop uint64 `json:"zero_window_drop" mib:"TcpExt.TCPZeroWindowDrop"`
	// TCPMemoryPressures counts entries into TCP memory pressure (all TCP
	// sockets over tcp_mem's pressure threshold); ...Chrono is the
	// milliseconds spent in it.
	TCPMemoryPressures       uint64 `json:"memory_pressures" mib:"TcpExt.TCPMemoryPressures"`
	TCPMemoryPressuresChrono uint64 `json:"memory_pressures_ms" mib:"TcpExt.TCPMemoryPressuresChrono"`
	TCPAbortOnMemory         uint64 `json:"abort_on_memory" mib:"TcpExt.TCPAbortOnMemory"`

	// Retransmissions by cause: TCPTimeouts counts retransmission timer
	// expiries (RTO), TCPLossProbes tail loss probes sent, TCPFastRetrans
	// segments retransmitted in fast recovery, TCPSlowStartRetrans
	// segments retransmitted after an RTO, TCPSynRetrans SYN and SYN-ACK
	// retransmits, TCPRetransFail retransmits the device refused,
	// TCPSpuriousRTOs RTOs later found unnecessary (F-RTO).
	TCPTimeouts          uint64 `json:"timeouts" mib:"TcpExt.TCPTimeouts"`
	TCPLossProbes        uint64 `json:"loss_probes" mib:"TcpExt.TCPLossProbes"`
	TCPLossProbeRecovery uint64 `json:"loss_probe_recovery" mib:"TcpExt.TCPLossProbeRecovery"`
	TCPFastRetrans       uint64 `json:"fast_retrans" mib:"TcpExt.TCPFastRetrans"`
	TCPSlowStartRetrans  uint64 `json:"slow_start_retrans" mib:"TcpExt.TCPSlowStartRetrans"`
	TCPSynRetrans        uint64 `json:"syn_retrans" mib:"TcpExt.TCPSynRetrans"`
	TCPRetransFail       uint64 `json:"retrans_fail" mib:"TcpExt.TCPRetransFail"`
	TCPSpuriousRTOs      uint64 `json:"spurious_rtos" mib:"TcpExt.TCPSpuriousRTOs"`

	// Resets sent because of data or close on a connection the
	// application abandoned.
	TCPAbortOnData    uint64 `json:"abort_on_data" mib:"TcpExt.TCPAbortOnData"`
	TCPAbortOnClose   uint64 `json:"abort_on_close" mib:"TcpExt.TCPAbortOnClose"`
	TCPAbortOnTimeout uint64 `json:"abort_on_timeout" mib:"TcpExt.TCPAbortOnTimeout"`

	// Missing names the counters this kernel does not have ("TcpExt.
	// TCPRcvQDrop" before 4.15): they read 0 here and mean "not counted",
	// not "none".
	Missing []string `json:"missing,omitempty"`
}

// tcpCounterFields pairs each counter's "Group.Name" with its field index,
// from the mib struct tags.
var tcpCounterFields = func() map[string]int {
	t := reflect.TypeOf(TCPCounters{})
	out := map[string]int{}
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("mib"); tag != "" {
			out[tag] = i
		}
	}
	return out
}()

// Sub returns c − prev for every counter (a counter below prev, after a
// reset, counts from zero). Missing is c's.
func (c TCPCounters) Sub(prev TCPCounters) TCPCounters {
	d := TCPCounters{Missing: c.Missing}
	cv, pv, dv := reflect.ValueOf(c), reflect.ValueOf(prev), reflect.ValueOf(&d).Elem()
	for _, i := range tcpCounterFields {
		dv.Field(i).SetUint(sub(cv.Field(i).Uint(), pv.Field(i).Uint()))
	}
	return d
}

// Counter returns the counter named "Group.Name" (as in the mib tags) and
// whether this kernel has it.
func (c TCPCounters) Counter(name string) (uint64, bool) {
	i, ok := tcpCounterFields[name]
	if !ok {
		return 0, false
	}
	for _, m := range c.Missing {
		if m == name {
			return 0, false
		}
	}
	return reflect.ValueOf(c).Field(i).Uint(), true
}

// TCPCounters reads the Tcp group of /proc/net/snmp and the TcpExt group
// of /proc/net/netstat.
func (fs FS) TCPCounters() (TCPCounters, error) { return fs.TCPCountersIn(OwnNet) }

// OwnNet is the directory of the reader's network namespace's MIB files;
// "/proc/PID/net" holds those of PID's namespace.
const OwnNet = "/proc/net"

// TCPCountersIn reads the Tcp and TcpExt counters of dir/snmp and
// dir/netstat: "/proc/PID/net" for the namespace PID lives in.
func (fs FS) TCPCountersIn(dir string) (TCPCounters, error) {
	groups := map[string]map[string]uint64{}
	for _, p := range []string{dir + "/snmp", dir + "/netstat"} {
		f, err := fs.Open(p)
		if err != nil {
			return TCPCounters{}, err
		}
		err = parseMIBGroups(f, groups)
		f.Close()
		if err != nil {
			return TCPCounters{}, fmt.Errorf("%s: %w", p, err)
		}
	}
	return tcpCountersFrom(groups)
}

func tcpCountersFrom(groups map[string]map[string]uint64) (TCPCounters, error) {
	var c TCPCounters
	for _, g := range []string{"Tcp", "TcpExt"} {
		if groups[g] == nil {
			return c, fmt.Errorf("no %s group", g)
		}
	}
	v := reflect.ValueOf(&c).Elem()
	for name, i := range tcpCounterFields {
		group, counter, _ := strings.Cut(name, ".")
		n, ok := groups[group][counter]
		if !ok {
			c.Missing = append(c.Missing, name)
			continue
		}
		v.Field(i).SetUint(n)
	}
	slices.Sort(c.Missing)
	return c, nil
}

// parseMIBGroups reads the header-line/value-line pairs of /proc/net/snmp
// and /proc/net/netstat ("TcpExt: SyncookiesSent ..." then "TcpExt: 0
// ...") into groups[group][name]. Negative values (Tcp MaxConn is -1: no
// limit) are not counters and are left out.
func parseMIBGroups(r io.Reader, groups map[string]map[string]uint64) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var header []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		group, ok := strings.CutSuffix(f[0], ":")
		if !ok {
			return fmt.Errorf("line %q does not start with a group name", sc.Text())
		}
		if header == nil || header[0] != f[0] {
			header = f
			continue
		}
		if len(f) != len(header) {
			return fmt.Errorf("%s: %d values for %d names", group, len(f)-1, len(header)-1)
		}
		m := map[string]uint64{}
		for i, name := range header[1:] {
			s := f[i+1]
			if strings.HasPrefix(s, "-") {
				if _, err := strconv.ParseInt(s, 10, 64); err != nil {
					return fmt.Errorf("%s %s: %w", group, name, err)
				}
				continue
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("%s %s: %w", group, name, err)
			}
			m[name] = v
		}
		groups[group] = m
		header = nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if header != nil {
		return fmt.Errorf("%s: names without values", strings.TrimSuffix(header[0], ":"))
	}
	return nil
}

// TCPSockstat is the TCP line of /proc/net/sockstat (and TCP6's inuse
// from sockstat6). InUse, Orphan, TimeWait and Alloc are this network
// namespace's sockets; MemPages is the pages all TCP sockets of the host
// hold, the number net.ipv4.tcp_mem limits.
type TCPSockstat struct {
	InUse    int64 `json:"inuse"`
	Orphan   int64 `json:"orphan"`
	TimeWait int64 `json:"tw"`
	Alloc    int64 `json:"alloc"`
	MemPages int64 `json:"mem_pages"`
	// InUse6 is sockstat6's TCP6 inuse; nil when IPv6 is off.
	InUse6 *int64 `json:"inuse6"`
}

// TCPSockstat reads /proc/net/sockstat and sockstat6.
func (fs FS) TCPSockstat() (TCPSockstat, error) { return fs.TCPSockstatIn(OwnNet) }

// TCPSockstatIn reads dir/sockstat and dir/sockstat6 ("/proc/PID/net":
// PID's namespace's sockets).
func (fs FS) TCPSockstatIn(dir string) (TCPSockstat, error) {
	f, err := fs.Open(dir + "/sockstat")
	if err != nil {
		return TCPSockstat{}, err
	}
	s, err := parseTCPSockstat(f)
	f.Close()
	if err != nil {
		return s, fmt.Errorf("%s/sockstat: %w", dir, err)
	}
	f, err = fs.Open(dir + "/sockstat6")
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer f.Close()
	v6, err := sockstatLine(f, "TCP6:")
	if err != nil {
		return s, fmt.Errorf("%s/sockstat6: %w", dir, err)
	}
	if n, ok := v6["inuse"]; ok {
		s.InUse6 = &n
	}
	return s, nil
}

func parseTCPSockstat(r io.Reader) (TCPSockstat, error) {
	v, err := sockstatLine(r, "TCP:")
	if err != nil {
		return TCPSockstat{}, err
	}
	for _, k := range []string{"inuse", "orphan", "tw", "alloc", "mem"} {
		if _, ok := v[k]; !ok {
			return TCPSockstat{}, fmt.Errorf("TCP line without %s", k)
		}
	}
	return TCPSockstat{InUse: v["inuse"], Orphan: v["orphan"], TimeWait: v["tw"], Alloc: v["alloc"], MemPages: v["mem"]}, nil
}

// sockstatLine reads the "KEY: name value name value" line starting with
// key.
func sockstatLine(r io.Reader, key string) (map[string]int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != key {
			continue
		}
		if len(f)%2 != 1 {
			return nil, fmt.Errorf("%s line with an odd number of words: %q", key, sc.Text())
		}
		out := map[string]int64{}
		for i := 1; i+1 < len(f); i += 2 {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", key, f[i], err)
			}
			out[f[i]] = v
		}
		return out, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no %s line", strings.TrimSuffix(key, ":"))
}

// TCPSettings are the sysctls that size TCP's queues and buffers. Each is
// nil when this kernel or network namespace does not show it.
type TCPSettings struct {
	// Somaxconn caps every listen() backlog (net.core.somaxconn).
	Somaxconn *int64 `json:"somaxconn"`
	// MaxSynBacklog sizes the SYN queue (net.ipv4.tcp_max_syn_backlog).
	MaxSynBacklog *int64 `json:"tcp_max_syn_backlog"`
	// Syncookies: 0 off, 1 when the SYN queue overflows, 2 always.
	Syncookies *int64 `json:"tcp_syncookies"`
	// AbortOnOverflow 1 makes a full accept queue answer with RST.
	AbortOnOverflow *int64 `json:"tcp_abort_on_overflow"`
	// Rmem and Wmem are min, default and max per-socket buffer sizes in
	// bytes (net.ipv4.tcp_rmem, tcp_wmem).
	Rmem *[3]int64 `json:"tcp_rmem_bytes"`
	Wmem *[3]int64 `json:"tcp_wmem_bytes"`
	// Mem is net.ipv4.tcp_mem: min, pressure and max for all TCP sockets
	// together, in pages. Host-wide: a network namespace other than the
	// host's does not show it.
	Mem *[3]int64 `json:"tcp_mem_pages"`
	// WindowScaling (RFC 7323) lets windows exceed 64 KiB.
	WindowScaling *int64 `json:"tcp_window_scaling"`
	// AdvWinScale and ModerateRcvbuf decide how much of the buffer is
	// advertised as window and whether the kernel grows it.
	AdvWinScale    *int64 `json:"tcp_adv_win_scale"`
	ModerateRcvbuf *int64 `json:"tcp_moderate_rcvbuf"`
}

// TCPSettings reads the TCP sysctls; absent ones stay nil.
func (fs FS) TCPSettings() (TCPSettings, error) {
	var s TCPSettings
	ints := []struct {
		name string
		dst  **int64
	}{
		{"net.core.somaxconn", &s.Somaxconn}, {"net.ipv4.tcp_max_syn_backlog", &s.MaxSynBacklog},
		{"net.ipv4.tcp_syncookies", &s.Syncookies}, {"net.ipv4.tcp_abort_on_overflow", &s.AbortOnOverflow},
		{"net.ipv4.tcp_window_scaling", &s.WindowScaling}, {"net.ipv4.tcp_adv_win_scale", &s.AdvWinScale},
		{"net.ipv4.tcp_moderate_rcvbuf", &s.ModerateRcvbuf},
	}
	for _, i := range ints {
		v, ok, err := fs.SysctlInt(i.name)
		if err != nil {
			return s, err
		}
		if ok {
			*i.dst = &v
		}
	}
	triples := []struct {
		name string
		dst  **[3]int64
	}{{"net.ipv4.tcp_rmem", &s.Rmem}, {"net.ipv4.tcp_wmem", &s.Wmem}, {"net.ipv4.tcp_mem", &s.Mem}}
	for _, t := range triples {
		v, ok, err := fs.SysctlInts(t.name)
		if err != nil {
			return s, err
		}
		if !ok {
			continue
		}
		if len(v) != 3 {
			return s, fmt.Errorf("sysctl %s: %d values, want 3", t.name, len(v))
		}
		*t.dst = &[3]int64{v[0], v[1], v[2]}
	}
	return s, nil
}

// TCPMemory is where all TCP sockets' memory stands against tcp_mem.
type TCPMemory struct {
	Pages int64 `json:"pages"`
	// PressurePages and MaxPages are tcp_mem's second and third values.
	PressurePages int64 `json:"pressure_pages"`
	MaxPages      int64 `json:"max_pages"`
}

// TCPMemoryOf joins sockstat's pages with tcp_mem; ok is false when
// tcp_mem is not visible (a network namespace other than the host's).
func TCPMemoryOf(s TCPSockstat, set TCPSettings) (TCPMemory, bool) {
	if set.Mem == nil {
		return TCPMemory{}, false
	}
	return TCPMemory{Pages: s.MemPages, PressurePages: set.Mem[1], MaxPages: set.Mem[2]}, true
}
