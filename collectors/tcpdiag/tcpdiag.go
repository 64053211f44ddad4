// Package tcpdiag lists TCP listeners and connections through the kernel's
// sock_diag netlink family (inet_diag, what `ss -tie` reads): per listener
// its accept queue and the backlog it was given, per connection its
// tcp_info (RTT, cwnd, retransmits, bytes) and socket memory (sk_drops,
// backlog). Netlink is spoken through github.com/mdlayher/netlink; the
// request encoder and the reply parser are pure functions tested on
// replies recorded from Linux 6.18.
package tcpdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"

	"github.com/mdlayher/netlink"
	"github.com/perfscope/perfscope/collectors/sockets"
	"golang.org/x/sys/unix"
)

// State is a TCP state as the kernel numbers it (include/net/tcp_states.h).
type State uint8

// The states perfscope selects on.
const (
	Established State = 1
	SynSent     State = 2
	SynRecv     State = 3
	FinWait1    State = 4
	FinWait2    State = 5
	TimeWait    State = 6
	Close       State = 7
	CloseWait   State = 8
	LastAck     State = 9
	Listen      State = 10
	Closing     State = 11
)

var stateNames = [...]string{"", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT",
	"CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"}

// String is the state's name as ss prints it.
func (s State) String() string {
	if int(s) < len(stateNames) && s != 0 {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText makes a State a name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// States is a set of states, as inet_diag's idiag_states bitmask.
type States uint32

// StatesOf builds a set.
func StatesOf(s ...State) States {
	var m States
	for _, v := range s {
		m |= 1 << v
	}
	return m
}

// Connected is every state of a connection that carries data.
var Connected = StatesOf(Established, SynRecv, FinWait1, FinWait2, CloseWait, LastAck, Closing)

// Socket is one TCP socket as inet_diag reports it.
type Socket struct {
	Family uint8          `json:"family"` // unix.AF_INET or unix.AF_INET6
	State  State          `json:"state"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// RecvQ and SendQ are idiag_rqueue and idiag_wqueue. For a listener
	// they are the accept queue: connections waiting for accept() now
	// (sk_ack_backlog) and the most it holds (sk_max_ack_backlog, the
	// listen() backlog capped by net.core.somaxconn). For a connection,
	// bytes received but not yet read and bytes sent but not yet acked.
	RecvQ uint32 `json:"recv_q"`
	SendQ uint32 `json:"send_q"`
	// Retransmits is idiag_retrans: the current RTO's retransmit count.
	Retransmits uint8  `json:"retransmits"`
	UID         uint32 `json:"uid"`
	Inode       uint64 `json:"inode"`
	// Cookie is the kernel's socket cookie, unique while the socket lives.
	Cookie uint64 `json:"cookie"`
	// Interface is the ifindex the socket is bound to (0: none).
	Interface uint32 `json:"interface,omitempty"`
	// Info and Memory are nil when the kernel sent none (sockets in
	// TIME_WAIT or SYN_RECV are mini-sockets without them).
	Info   *Info   `json:"tcp_info"`
	Memory *Memory `json:"memory"`
	// Congestion is the congestion control algorithm ("cubic", "bbr").
	Congestion string `json:"congestion,omitempty"`
	// PIDs are the processes holding the socket (Owners fills it); empty
	// when none was found (the owner exited, or lives in a /proc this
	// reader cannot see).
	PIDs []int `json:"pids,omitempty"`
}

// Listening reports whether the socket is a listener, whose RecvQ/SendQ
// are its accept queue.
func (s Socket) Listening() bool { return s.State == Listen }

// Memory is INET_DIAG_SKMEMINFO (SK_MEMINFO_*), in bytes except Drops.
type Memory struct {
	RmemAlloc  uint32 `json:"rmem_alloc"`
	Rcvbuf     uint32 `json:"rcvbuf"`
	WmemAlloc  uint32 `json:"wmem_alloc"`
	Sndbuf     uint32 `json:"sndbuf"`
	FwdAlloc   uint32 `json:"fwd_alloc"`
	WmemQueued uint32 `json:"wmem_queued"`
	Optmem     uint32 `json:"optmem"`
	// Backlog is the bytes waiting in the socket backlog (segments that
	// arrived while a thread owned the socket). Since 4.6.
	Backlog *uint32 `json:"backlog"`
	// Drops is sk_drops: segments dropped at this socket. Since 4.6.
	Drops *uint32 `json:"drops"`
}

// Info is the part of struct tcp_info perfscope reads. Fields newer than
// the running kernel are nil.
type Info struct {
	CaState     uint8  `json:"ca_state"`
	RTOUs       uint32 `json:"rto_us"`
	RTTUs       uint32 `json:"rtt_us"`
	RTTVarUs    uint32 `json:"rttvar_us"`
	SndCwnd     uint32 `json:"snd_cwnd"`
	SndSsthresh uint32 `json:"snd_ssthresh"`
	SndMSS      uint32 `json:"snd_mss"`
	RcvMSS      uint32 `json:"rcv_mss"`
	Unacked     uint32 `json:"unacked"`
	Lost        uint32 `json:"lost"`
	// Retrans is segments retransmitted and not yet acked; TotalRetrans
	// every segment retransmitted over the connection's life.
	Retrans      uint32 `json:"retrans"`
	TotalRetrans uint32 `json:"total_retrans"`
	RcvSpace     uint32 `json:"rcv_space"`
	RcvSsthresh  uint32 `json:"rcv_ssthresh"`
	// RcvRTTUs is the receiver's own RTT estimate (ss's rcv_rtt): how
	// long the peer takes to send a window's worth (with timestamps, the
	// echo of its data's timestamp). 0 until the connection received
	// enough data to estimate it.
	RcvRTTUs uint32 `json:"rcv_rtt_us"`
	// Since 4.1-4.19 (older kernels send a shorter tcp_info).
	BytesAcked    *uint64 `json:"bytes_acked"`
	BytesReceived *uint64 `json:"bytes_received"`
	SegsOut       *uint32 `json:"segs_out"`
	SegsIn        *uint32 `json:"segs_in"`
	MinRTTUs      *uint32 `json:"min_rtt_us"`
	DeliveryRate  *uint64 `json:"delivery_rate_bps"`
	BusyTimeUs    *uint64 `json:"busy_time_us"`
	RwndLimitedUs *uint64 `json:"rwnd_limited_us"`
	SndbufLimited *uint64 `json:"sndbuf_limited_us"`
	BytesSent     *uint64 `json:"bytes_sent"`
	BytesRetrans  *uint64 `json:"bytes_retrans"`
	// Since 5.4-6.7.
	SndWnd *uint32 `json:"snd_wnd"`
	RcvWnd *uint32 `json:"rcv_wnd"`
	// TotalRTO counts RTO timeouts over the connection's life (6.7+).
	TotalRTO *uint16 `json:"total_rto"`
}

// Query selects sockets.
type Query struct {
	States States
	// Port keeps sockets whose local port is Port (0: every port); the
	// kernel filters, so a busy host's other sockets are never copied.
	Port uint16
	// Netns is a network namespace file (/proc/PID/ns/net,
	// /run/netns/NAME) whose sockets are listed; "" means this process's.
	Netns string
	// Find, when set, looks up these sockets (from an earlier listing)
	// one by one instead of listing the namespace: the kernel finds each
	// by its addresses, ports and interface in its hash tables (no walk
	// of every bucket) and answers only if the one found has the same
	// cookie. Those gone are left out. A listener of an SO_REUSEPORT
	// group other than the one the lookup picks is never found: find
	// only listeners alone on their address and port. States and Port
	// are not used.
	Find []Socket
}

// ErrUnavailable means the kernel has no inet_diag for TCP (the tcp_diag
// module is absent).
var ErrUnavailable = errors.New("sock_diag cannot list TCP sockets (tcp_diag missing)")

// Sockets lists the TCP sockets of q's namespace, IPv4 and IPv6.
func Sockets(q Query) ([]Socket, error) {
	msgs, err := messages(q)
	if err != nil {
		return nil, err
	}
	out := make([]Socket, 0, len(msgs))
	for _, m := range msgs {
		s, err := parseMessage(m)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out, nil
}

// messages dumps the raw inet_diag_msg replies for both families.
func messages(q Query) ([][]byte, error) {
	cfg := &netlink.Config{}
	if q.Netns != "" {
		f, err := os.Open(q.Netns)
		if err != nil {
			return nil, fmt.Errorf("network namespace: %w", err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, cfg)
	if err != nil {
		return nil, fmt.Errorf("sock_diag netlink: %w", err)
	}
	defer c.Close()
	var out [][]byte
	if len(q.Find) > 0 {
		for _, sock := range q.Find {
			msgs, err := c.Execute(netlink.Message{
				Header: netlink.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: netlink.Request},
				Data:   encodeFind(sock),
			})
			// ENOENT: no such socket now; ESTALE: another socket has its
			// addresses (the cookie differs).
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESTALE) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("inet_diag lookup of %v: %w", sock.Local, err)
			}
			for _, m := range msgs {
				out = append(out, m.Data)
			}
		}
		return out, nil
	}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		msgs, err := c.Execute(netlink.Message{
			Header: netlink.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: netlink.Request | netlink.Dump},
			Data:   encodeRequest(family, q),
		})
		if errors.Is(err, unix.ENOENT) {
			if family == unix.AF_INET6 {
				continue // IPv6 disabled
			}
			return nil, ErrUnavailable
		}
		if err != nil {
			return nil, fmt.Errorf("inet_diag dump: %w", err)
		}
		for _, m := range msgs {
			out = append(out, m.Data)
		}
	}
	return out, nil
}

func less(a, b Socket) bool {
	if a.Local != b.Local {
		return a.Local.Addr().Less(b.Local.Addr()) || a.Local.Addr() == b.Local.Addr() && a.Local.Port() < b.Local.Port()
	}
	if a.Remote.Addr() != b.Remote.Addr() {
		return a.Remote.Addr().Less(b.Remote.Addr())
	}
	return a.Remote.Port() < b.Remote.Port()
}

// inet_diag wire format (include/uapi/linux/inet_diag.h, sock_diag.h).
const (
	sizeofSockID  = 48
	sizeofRequest = 8 + sizeofSockID
	sizeofMsg     = 4 + sizeofSockID + 20

	attrReqBytecode = 1 // INET_DIAG_REQ_BYTECODE

	attrMeminfo   = 1 // INET_DIAG_MEMINFO
	attrInfo      = 2 // INET_DIAG_INFO
	attrCong      = 4 // INET_DIAG_CONG
	attrSkmeminfo = 7 // INET_DIAG_SKMEMINFO

	bcSourcePortEq = 11 // INET_DIAG_BC_S_EQ
)

// encodeRequest builds an inet_diag_req_v2 for family asking for tcp_info,
// the congestion algorithm and socket memory, with a port filter as
// inet_diag bytecode when q.Port is set.
func encodeRequest(family uint8, q Query) []byte {
	b := make([]byte, sizeofRequest)
	b[0] = family
	b[1] = unix.IPPROTO_TCP
	b[2] = 1<<(attrInfo-1) | 1<<(attrCong-1) | 1<<(attrSkmeminfo-1)
	states := q.States
	if states == 0 {
		states = ^States(0)
	}
	binary.NativeEndian.PutUint32(b[4:], uint32(states))
	if q.Port == 0 {
		return b
	}
	// Two inet_diag_bc_op {code, yes, no}: "local port == Port", whose
	// second op carries the port in no. yes jumps to the end (accept,
	// offset 8 = len), no past it (reject, len + 4).
	bc := []byte{bcSourcePortEq, 8, 0, 0, 0, 0, 0, 0}
	binary.NativeEndian.PutUint16(bc[2:], 12)
	binary.NativeEndian.PutUint16(bc[6:], q.Port)
	attr := make([]byte, 4+len(bc))
	binary.NativeEndian.PutUint16(attr[0:], uint16(len(attr)))
	binary.NativeEndian.PutUint16(attr[2:], attrReqBytecode)
	copy(attr[4:], bc)
	return append(b, attr...)
}

// encodeFind builds the inet_diag_req_v2 of one socket's lookup (no
// NLM_F_DUMP): its inet_diag_sockid as inet_diag reported it, with the
// same attributes a listing asks for.
func encodeFind(s Socket) []byte {
	b := encodeRequest(s.Family, Query{})
	id := b[8 : 8+sizeofSockID]
	binary.BigEndian.PutUint16(id[0:], s.Local.Port())
	binary.BigEndian.PutUint16(id[2:], s.Remote.Port())
	addr := func(dst []byte, a netip.Addr) {
		switch {
		case !a.IsValid():
			return // any address: zeros
		case s.Family == unix.AF_INET:
			a4 := a.Unmap().As4()
			copy(dst, a4[:])
			return
		case a.Is4():
			a = netip.AddrFrom16(a.As16()) // parseMessage unmapped it
		}
		a16 := a.As16()
		copy(dst, a16[:])
	}
	addr(id[4:20], s.Local.Addr())
	addr(id[20:36], s.Remote.Addr())
	binary.NativeEndian.PutUint32(id[36:], s.Interface)
	binary.NativeEndian.PutUint32(id[40:], uint32(s.Cookie))
	binary.NativeEndian.PutUint32(id[44:], uint32(s.Cookie>>32))
	return b
}

// parseMessage decodes one inet_diag_msg and its attributes.
func parseMessage(b []byte) (Socket, error) {
	if len(b) < sizeofMsg {
		return Socket{}, fmt.Errorf("inet_diag_msg of %d bytes, want at least %d", len(b), sizeofMsg)
	}
	s := Socket{Family: b[0], State: State(b[1]), Retransmits: b[3]}
	id := b[4 : 4+sizeofSockID]
	sport, dport := binary.BigEndian.Uint16(id[0:]), binary.BigEndian.Uint16(id[2:])
	var src, dst netip.Addr
	switch s.Family {
	case unix.AF_INET:
		src, dst = netip.AddrFrom4([4]byte(id[4:8])), netip.AddrFrom4([4]byte(id[20:24]))
	case unix.AF_INET6:
		src, dst = netip.AddrFrom16([16]byte(id[4:20])).Unmap(), netip.AddrFrom16([16]byte(id[20:36])).Unmap()
	default:
		return Socket{}, fmt.Errorf("inet_diag_msg of family %d", s.Family)
	}
	s.Local, s.Remote = netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport)
	s.Interface = binary.NativeEndian.Uint32(id[36:])
	s.Cookie = uint64(binary.NativeEndian.Uint32(id[40:])) | uint64(binary.NativeEndian.Uint32(id[44:]))<<32
	rest := b[4+sizeofSockID:]
	s.RecvQ = binary.NativeEndian.Uint32(rest[4:])
	s.SendQ = binary.NativeEndian.Uint32(rest[8:])
	s.UID = binary.NativeEndian.Uint32(rest[12:])
	s.Inode = uint64(binary.NativeEndian.Uint32(rest[16:]))
	ad, err := netlink.NewAttributeDecoder(b[sizeofMsg:])
	if err != nil {
		return Socket{}, fmt.Errorf("inet_diag attributes: %w", err)
	}
	ad.ByteOrder = binary.NativeEndian
	for ad.Next() {
		switch ad.Type() {
		case attrInfo:
			s.Info = parseInfo(ad.Bytes())
		case attrCong:
			s.Congestion = nulTerminated(ad.Bytes())
		case attrSkmeminfo:
			s.Memory = parseMemory(ad.Bytes())
		}
	}
	if err := ad.Err(); err != nil {
		return Socket{}, fmt.Errorf("inet_diag attributes: %w", err)
	}
	return s, nil
}

func nulTerminated(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func parseMemory(b []byte) *Memory {
	if len(b) < 7*4 {
		return nil
	}
	u := func(i int) uint32 { return binary.NativeEndian.Uint32(b[4*i:]) }
	m := &Memory{RmemAlloc: u(0), Rcvbuf: u(1), WmemAlloc: u(2), Sndbuf: u(3), FwdAlloc: u(4), WmemQueued: u(5), Optmem: u(6)}
	if len(b) >= 9*4 {
		backlog, drops := u(7), u(8)
		m.Backlog, m.Drops = &backlog, &drops
	}
	return m
}

// Offsets of struct tcp_info, fixed by the UAPI (checked against
// golang.org/x/sys/unix.TCPInfo by the tests).
const (
	offCaState     = 1
	offRTO         = 8
	offSndMSS      = 16
	offRcvMSS      = 20
	offUnacked     = 24
	offLost        = 32
	offRetrans     = 36
	offRcvSsthresh = 64
	offRTT         = 68
	offRTTVar      = 72
	offSndSsthresh = 76
	offSndCwnd     = 80
	offRcvRTT      = 92
	offRcvSpace    = 96
	offTotalRetr   = 100
	offBytesAcked  = 120
	offBytesRecv   = 128
	offSegsOut     = 136
	offSegsIn      = 140
	offMinRTT      = 148
	offDelivery    = 160
	offBusy        = 168
	offRwndLim     = 176
	offSndbufLim   = 184
	offBytesSent   = 200
	offBytesRetr   = 208
	offSndWnd      = 228
	offRcvWnd      = 232
	offTotalRTO    = 240
	minLen         = offTotalRetr + 4 // tcp_info of Linux 2.6
)

// parseInfo reads struct tcp_info (include/uapi/linux/tcp.h) as long as
// the kernel sent it: the kernel only ever appends fields, so a field is
// present exactly when the reply reaches past its end.
func parseInfo(b []byte) *Info {
	if len(b) < minLen {
		return nil
	}
	u32 := func(o int) uint32 { return binary.NativeEndian.Uint32(b[o:]) }
	in := &Info{CaState: b[offCaState], RTOUs: u32(offRTO), SndMSS: u32(offSndMSS), RcvMSS: u32(offRcvMSS),
		Unacked: u32(offUnacked), Lost: u32(offLost), Retrans: u32(offRetrans), RcvSsthresh: u32(offRcvSsthresh),
		RTTUs: u32(offRTT), RTTVarUs: u32(offRTTVar), SndSsthresh: u32(offSndSsthresh), SndCwnd: u32(offSndCwnd),
		RcvRTTUs: u32(offRcvRTT), RcvSpace: u32(offRcvSpace), TotalRetrans: u32(offTotalRetr)}
	opt32 := func(o int) *uint32 {
		if len(b) < o+4 {
			return nil
		}
		v := u32(o)
		return &v
	}
	opt64 := func(o int) *uint64 {
		if len(b) < o+8 {
			return nil
		}
		v := binary.NativeEndian.Uint64(b[o:])
		return &v
	}
	in.BytesAcked, in.BytesReceived = opt64(offBytesAcked), opt64(offBytesRecv)
	in.SegsOut, in.SegsIn, in.MinRTTUs = opt32(offSegsOut), opt32(offSegsIn), opt32(offMinRTT)
	in.DeliveryRate, in.BusyTimeUs, in.RwndLimitedUs, in.SndbufLimited = opt64(offDelivery), opt64(offBusy), opt64(offRwndLim), opt64(offSndbufLim)
	in.BytesSent, in.BytesRetrans = opt64(offBytesSent), opt64(offBytesRetr)
	in.SndWnd, in.RcvWnd = opt32(offSndWnd), opt32(offRcvWnd)
	if len(b) >= offTotalRTO+2 {
		v := binary.NativeEndian.Uint16(b[offTotalRTO:])
		in.TotalRTO = &v
	}
	return in
}

// AttachOwners fills each socket's PIDs from the /proc below fs (the
// processes whose file descriptors hold its inode). Mini-sockets without
// an inode (TIME_WAIT, SYN_RECV) stay without.
func AttachOwners(fs sockets.FS, socks []Socket) error {
	inodes := map[uint64]bool{}
	for _, s := range socks {
		if s.Inode != 0 {
			inodes[s.Inode] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	owners, err := fs.Owners(inodes)
	if err != nil {
		return fmt.Errorf("socket owners: %w", err)
	}
	for i := range socks {
		socks[i].PIDs = owners[socks[i].Inode]
	}
	return nil
}
