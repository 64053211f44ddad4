// Package netlinkq reads, from the kernel's "netdev" generic-netlink family
// (Linux 6.8+), which NAPI instance serves each RX and TX queue of a device,
// which IRQ or kernel thread each NAPI instance runs on and its settings
// (napi_defer_hard_irqs, gro_flush_timeout, irq_suspend_timeout, threaded),
// and the per-queue statistics drivers report (qstats-get: packets, bytes,
// allocation failures, hardware drops, hardware GRO, …). perfscope uses it
// to name the queue behind each napi:napi_poll it counts and to judge the
// receive path's NAPI settings. It speaks netlink directly
// through golang.org/x/sys/unix: the family needs a handful of attributes,
// and the parser is a pure function tested on recorded replies.
package netlinkq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// Attribute and command numbers of include/uapi/linux/netdev.h (stable
// UAPI).
const (
	familyName = "netdev"

	cmdQueueGet  = 10 // NETDEV_CMD_QUEUE_GET, 6.8+
	cmdNAPIGet   = 11 // NETDEV_CMD_NAPI_GET, 6.8+
	cmdQStatsGet = 12 // NETDEV_CMD_QSTATS_GET, 6.10+

	attrQueueID      = 1 // NETDEV_A_QUEUE_ID
	attrQueueIfindex = 2 // NETDEV_A_QUEUE_IFINDEX
	attrQueueType    = 3 // NETDEV_A_QUEUE_TYPE
	attrQueueNAPIID  = 4 // NETDEV_A_QUEUE_NAPI_ID

	attrNAPIIfindex = 1 // NETDEV_A_NAPI_IFINDEX
	attrNAPIID      = 2 // NETDEV_A_NAPI_ID
	attrNAPIIRQ     = 3 // NETDEV_A_NAPI_IRQ
	attrNAPIPID     = 4 // NETDEV_A_NAPI_PID
	// Settings, Linux 6.13+ (threaded 6.17+).
	attrNAPIDeferHardIRQs     = 5 // NETDEV_A_NAPI_DEFER_HARD_IRQS
	attrNAPIGROFlushTimeout   = 6 // NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT (ns)
	attrNAPIIRQSuspendTimeout = 7 // NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT (ns)
	attrNAPIThreaded          = 8 // NETDEV_A_NAPI_THREADED

	attrQStatsIfindex   = 1 // NETDEV_A_QSTATS_IFINDEX
	attrQStatsQueueType = 2 // NETDEV_A_QSTATS_QUEUE_TYPE
	attrQStatsQueueID   = 3 // NETDEV_A_QSTATS_QUEUE_ID
	attrQStatsScope     = 4 // NETDEV_A_QSTATS_SCOPE
	qstatsScopeQueue    = 1 // NETDEV_QSTATS_SCOPE_QUEUE
)

// qstatNames are the counters of a qstats-get reply by attribute, named as
// the kernel's netlink spec (Documentation/netlink/specs/netdev.yaml) and
// `ynl --dump qstats-get` name them.
var qstatNames = map[uint16]string{
	8: "rx-packets", 9: "rx-bytes", 10: "tx-packets", 11: "tx-bytes",
	12: "rx-alloc-fail", 13: "rx-hw-drops", 14: "rx-hw-drop-overruns",
	15: "rx-csum-complete", 16: "rx-csum-unnecessary", 17: "rx-csum-none", 18: "rx-csum-bad",
	19: "rx-hw-gro-packets", 20: "rx-hw-gro-bytes", 21: "rx-hw-gro-wire-packets", 22: "rx-hw-gro-wire-bytes",
	23: "rx-hw-drop-ratelimits", 24: "tx-hw-drops", 25: "tx-hw-drop-errors",
	26: "tx-csum-none", 27: "tx-needs-csum", 28: "tx-hw-gso-packets", 29: "tx-hw-gso-bytes",
	30: "tx-hw-gso-wire-packets", 31: "tx-hw-gso-wire-bytes", 32: "tx-hw-drop-ratelimits",
	33: "tx-stop", 34: "tx-wake",
}

// ErrUnavailable means this kernel's netdev family cannot list queues
// (older than 6.8, or built without it). Callers fall back to measuring the
// NAPI → queue mapping (netqueue.Snapshot.NAPIQueueMap).
var ErrUnavailable = errors.New("the kernel's netdev netlink family cannot answer this (queues and NAPI need Linux 6.8+, per-queue statistics 6.10+)")

// QueueType is "rx" or "tx".
type QueueType string

// Queue types.
const (
	RX QueueType = "rx"
	TX QueueType = "tx"
)

// Queue is one queue of a device.
type Queue struct {
	Ifindex int       `json:"ifindex"`
	ID      int       `json:"id"`
	Type    QueueType `json:"type"`
	// NAPIID is the NAPI instance serving the queue; 0 when the driver
	// does not report one (many virtual drivers, or NAPI disabled).
	NAPIID uint32 `json:"napi_id"`
}

// NAPI is one NAPI instance of a device.
type NAPI struct {
	Ifindex int    `json:"ifindex"`
	ID      uint32 `json:"id"`
	// IRQ is the interrupt the instance is scheduled from, -1 when none
	// is reported (veth, software devices).
	IRQ int `json:"irq"`
	// PID is the kernel thread polling it under threaded NAPI, 0 otherwise.
	PID int `json:"pid"`
	// The instance's settings; nil where the kernel does not report them
	// (before Linux 6.13; threaded 6.17).
	// DeferHardIRQs is napi_defer_hard_irqs: how many empty polls may pass
	// with the device's IRQ kept masked; GROFlushTimeoutNs holds it masked
	// that long between polls (both 0: an IRQ per poll cycle).
	DeferHardIRQs       *uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNs   *uint64 `json:"gro_flush_timeout_ns"`
	IRQSuspendTimeoutNs *uint64 `json:"irq_suspend_timeout_ns"`
	// Threaded is "enabled", "disabled" or, on kernels that have it,
	// "busy-poll" (a kthread busy-polling the instance).
	Threaded string `json:"threaded,omitempty"`
}

// QueueStats are one queue's counters as its driver reports them through
// qstats-get (since boot or the driver's last reset); only the counters
// the driver fills are present, keyed by the kernel's names ("rx-packets",
// "rx-alloc-fail", "rx-hw-drops", …).
type QueueStats struct {
	Ifindex  int               `json:"ifindex"`
	Type     QueueType         `json:"type"`
	ID       int               `json:"id"`
	Counters map[string]uint64 `json:"counters"`
}

// Queues lists the queues of ifindex (every device when 0) in the caller's
// network namespace.
func Queues(ifindex int) ([]Queue, error) {
	msgs, err := dump(cmdQueueGet, attrQueueIfindex, ifindex)
	if err != nil {
		return nil, err
	}
	qs, err := parseQueues(msgs)
	if err != nil {
		return nil, err
	}
	return filterIfindex(qs, ifindex, func(q Queue) int { return q.Ifindex }), nil
}

// NAPIs lists the NAPI instances of ifindex (every device when 0).
func NAPIs(ifindex int) ([]NAPI, error) {
	msgs, err := dump(cmdNAPIGet, attrNAPIIfindex, ifindex)
	if err != nil {
		return nil, err
	}
	ns, err := parseNAPIs(msgs)
	if err != nil {
		return nil, err
	}
	return filterIfindex(ns, ifindex, func(n NAPI) int { return n.Ifindex }), nil
}

// QStats lists the per-queue statistics of ifindex (every device when 0)
// that their drivers report; ErrUnavailable where the kernel has no
// qstats-get (before 6.10), and an empty list where no driver reports any
// (veth, loopback).
func QStats(ifindex int) ([]QueueStats, error) {
	body := u32Attr(attrQStatsScope, qstatsScopeQueue)
	if ifindex > 0 {
		body = append(u32Attr(attrQStatsIfindex, uint32(ifindex)), body...)
	}
	msgs, err := dumpBody(cmdQStatsGet, body)
	if err != nil {
		return nil, err
	}
	qs, err := parseQStats(msgs)
	if err != nil {
		return nil, err
	}
	return filterIfindex(qs, ifindex, func(q QueueStats) int { return q.Ifindex }), nil
}

// Sub is the counters' growth since prev (the same queue, read earlier);
// a counter absent from either, or that went backwards (a driver reset),
// is left out.
func (q QueueStats) Sub(prev QueueStats) QueueStats {
	out := QueueStats{Ifindex: q.Ifindex, Type: q.Type, ID: q.ID, Counters: map[string]uint64{}}
	for k, v := range q.Counters {
		if p, ok := prev.Counters[k]; ok && v >= p {
			out.Counters[k] = v - p
		}
	}
	return out
}

// QueueNAPI maps each NAPI id serving an RX queue of the list to that
// queue.
func QueueNAPI(queues []Queue) map[uint32]int {
	out := map[uint32]int{}
	for _, q := range queues {
		if q.Type == RX && q.NAPIID != 0 {
			out[q.NAPIID] = q.ID
		}
	}
	return out
}

func filterIfindex[T any](in []T, ifindex int, of func(T) int) []T {
	if ifindex == 0 {
		return in
	}
	var out []T
	for _, v := range in {
		if of(v) == ifindex {
			out = append(out, v)
		}
	}
	return out
}

// attrs is one message's attributes by type (last one wins).
type attrs map[uint16][]byte

// uint reads a netlink "uint" attribute, which the kernel sends in 4 or 8
// bytes depending on the value.
func (a attrs) uint(t uint16) (uint64, bool) {
	v, ok := a[t]
	switch {
	case !ok:
		return 0, false
	case len(v) >= 8:
		return binary.NativeEndian.Uint64(v), true
	case len(v) >= 4:
		return uint64(binary.NativeEndian.Uint32(v)), true
	}
	return 0, false
}

func (a attrs) u32(t uint16) (uint32, bool) {
	v, ok := a[t]
	if !ok || len(v) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(v), true
}

// walkAttrs visits netlink attributes (4-byte aligned TLVs) in order.
func walkAttrs(b []byte, visit func(t uint16, v []byte)) error {
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < unix.SizeofNlAttr || l > len(b) {
			return fmt.Errorf("netlink attribute length %d out of bounds (%d bytes left)", l, len(b))
		}
		visit(binary.NativeEndian.Uint16(b[2:4])&^(unix.NLA_F_NESTED|0x4000), b[unix.SizeofNlAttr:l])
		adv := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	return nil
}

// parseAttrs returns one message's attributes by type.
func parseAttrs(b []byte) (attrs, error) {
	out := attrs{}
	err := walkAttrs(b, func(t uint16, v []byte) { out[t] = v })
	return out, err
}

const genlHeaderLen = 4 // struct genlmsghdr: cmd, version, reserved

// queueBefore orders queues by device, type (rx before tx) and id.
func queueBefore(ifA int, typeA QueueType, idA int, ifB int, typeB QueueType, idB int) bool {
	if ifA != ifB {
		return ifA < ifB
	}
	if typeA != typeB {
		return typeA < typeB
	}
	return idA < idB
}

// parseQueues reads the payloads (generic-netlink header included) of a
// NETDEV_CMD_QUEUE_GET dump.
func parseQueues(payloads [][]byte) ([]Queue, error) {
	var out []Queue
	for i, p := range payloads {
		if len(p) < genlHeaderLen {
			return nil, fmt.Errorf("queue message %d: %d bytes, shorter than the genl header", i, len(p))
		}
		a, err := parseAttrs(p[genlHeaderLen:])
		if err != nil {
			return nil, fmt.Errorf("queue message %d: %w", i, err)
		}
		id, okID := a.u32(attrQueueID)
		ifindex, okIf := a.u32(attrQueueIfindex)
		typ, okType := a.u32(attrQueueType)
		if !okID || !okIf || !okType {
			return nil, fmt.Errorf("queue message %d lacks id, ifindex or type", i)
		}
		q := Queue{Ifindex: int(ifindex), ID: int(id), Type: RX}
		if typ == 1 {
			q.Type = TX
		} else if typ != 0 {
			continue // newer queue types (e.g. XSK) are not RX/TX queues
		}
		q.NAPIID, _ = a.u32(attrQueueNAPIID)
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool {
		return queueBefore(out[i].Ifindex, out[i].Type, out[i].ID, out[j].Ifindex, out[j].Type, out[j].ID)
	})
	return out, nil
}

// parseNAPIs reads the payloads of a NETDEV_CMD_NAPI_GET dump.
func parseNAPIs(payloads [][]byte) ([]NAPI, error) {
	var out []NAPI
	for i, p := range payloads {
		if len(p) < genlHeaderLen {
			return nil, fmt.Errorf("napi message %d: %d bytes, shorter than the genl header", i, len(p))
		}
		a, err := parseAttrs(p[genlHeaderLen:])
		if err != nil {
			return nil, fmt.Errorf("napi message %d: %w", i, err)
		}
		id, okID := a.u32(attrNAPIID)
		ifindex, okIf := a.u32(attrNAPIIfindex)
		if !okID || !okIf {
			return nil, fmt.Errorf("napi message %d lacks id or ifindex", i)
		}
		n := NAPI{Ifindex: int(ifindex), ID: id, IRQ: -1}
		if irq, ok := a.u32(attrNAPIIRQ); ok {
			n.IRQ = int(int32(irq))
		}
		if pid, ok := a.u32(attrNAPIPID); ok {
			n.PID = int(pid)
		}
		if v, ok := a.u32(attrNAPIDeferHardIRQs); ok {
			n.DeferHardIRQs = &v
		}
		if v, ok := a.uint(attrNAPIGROFlushTimeout); ok {
			n.GROFlushTimeoutNs = &v
		}
		if v, ok := a.uint(attrNAPIIRQSuspendTimeout); ok {
			n.IRQSuspendTimeoutNs = &v
		}
		if v, ok := a.u32(attrNAPIThreaded); ok {
			n.Threaded = threadedName(v)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// threadedName names NETDEV_A_NAPI_THREADED's values (enum
// netdev_napi_threaded).
func threadedName(v uint32) string {
	switch v {
	case 0:
		return "disabled"
	case 1:
		return "enabled"
	case 2:
		return "busy-poll"
	}
	return fmt.Sprintf("unknown (%d)", v)
}

// parseQStats reads the payloads of a NETDEV_CMD_QSTATS_GET dump with
// queue scope.
func parseQStats(payloads [][]byte) ([]QueueStats, error) {
	var out []QueueStats
	for i, p := range payloads {
		if len(p) < genlHeaderLen {
			return nil, fmt.Errorf("qstats message %d: %d bytes, shorter than the genl header", i, len(p))
		}
		a, err := parseAttrs(p[genlHeaderLen:])
		if err != nil {
			return nil, fmt.Errorf("qstats message %d: %w", i, err)
		}
		ifindex, okIf := a.u32(attrQStatsIfindex)
		typ, okType := a.u32(attrQStatsQueueType)
		id, okID := a.u32(attrQStatsQueueID)
		if !okIf || !okType || !okID {
			return nil, fmt.Errorf("qstats message %d lacks ifindex, queue type or queue id", i)
		}
		q := QueueStats{Ifindex: int(ifindex), ID: int(id), Type: RX, Counters: map[string]uint64{}}
		if typ == 1 {
			q.Type = TX
		} else if typ != 0 {
			continue
		}
		for t, name := range qstatNames {
			if v, ok := a.uint(t); ok {
				q.Counters[name] = v
			}
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool {
		return queueBefore(out[i].Ifindex, out[i].Type, out[i].ID, out[j].Ifindex, out[j].Type, out[j].ID)
	})
	return out, nil
}

// attr encodes one netlink attribute.
func attr(t uint16, value []byte) []byte {
	l := unix.SizeofNlAttr + len(value)
	b := make([]byte, (l+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1))
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], t)
	copy(b[unix.SizeofNlAttr:], value)
	return b
}

func u32Attr(t uint16, v uint32) []byte {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return attr(t, b[:])
}

// request encodes a generic-netlink request.
func request(family uint16, flags uint16, seq uint32, cmd uint8, body []byte) []byte {
	l := unix.NLMSG_HDRLEN + genlHeaderLen + len(body)
	b := make([]byte, l)
	binary.NativeEndian.PutUint32(b[0:4], uint32(l))
	binary.NativeEndian.PutUint16(b[4:6], family)
	binary.NativeEndian.PutUint16(b[6:8], flags|unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:12], seq)
	b[16] = cmd
	b[17] = 1 // version
	copy(b[unix.NLMSG_HDRLEN+genlHeaderLen:], body)
	return b
}

// conn is a generic-netlink socket.
type conn struct {
	fd  int
	seq uint32
}

func dial() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("open generic netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind generic netlink socket: %w", err)
	}
	return &conn{fd: fd}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// roundTrip sends one request and collects the payloads of its replies
// until NLMSG_DONE (dumps) or the single reply / ack.
func (c *conn) roundTrip(family, flags uint16, cmd uint8, body []byte) ([][]byte, error) {
	c.seq++
	if err := unix.Sendto(c.fd, request(family, flags, c.seq, cmd, body), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("send netlink request: %w", err)
	}
	var out [][]byte
	buf := make([]byte, 1<<16)
	// A dump of even thousands of queues fits in a few hundred reads;
	// the bound keeps a misbehaving kernel from looping us forever.
	for range 100000 {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("receive netlink reply: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("parse netlink reply: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != c.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("short netlink error message")
				}
				if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
					return nil, unix.Errno(errno)
				}
				return out, nil // ack
			default:
				out = append(out, append([]byte(nil), m.Data...))
				if flags&unix.NLM_F_DUMP == 0 {
					return out, nil
				}
			}
		}
	}
	return nil, errors.New("netlink dump did not end")
}

// familyID resolves the "netdev" family and checks it has the command.
func (c *conn) familyID(cmd uint8) (uint16, error) {
	name := append([]byte(familyName), 0)
	replies, err := c.roundTrip(unix.GENL_ID_CTRL, 0, unix.CTRL_CMD_GETFAMILY, attr(unix.CTRL_ATTR_FAMILY_NAME, name))
	if errors.Is(err, unix.ENOENT) {
		return 0, fmt.Errorf("no %q generic netlink family: %w", familyName, ErrUnavailable)
	}
	if err != nil {
		return 0, fmt.Errorf("resolve %q generic netlink family: %w", familyName, err)
	}
	if len(replies) == 0 || len(replies[0]) < genlHeaderLen {
		return 0, fmt.Errorf("empty reply resolving %q", familyName)
	}
	a, err := parseAttrs(replies[0][genlHeaderLen:])
	if err != nil {
		return 0, err
	}
	raw, ok := a[unix.CTRL_ATTR_FAMILY_ID]
	if !ok || len(raw) < 2 {
		return 0, fmt.Errorf("reply for %q has no family id", familyName)
	}
	if !hasOp(a[unix.CTRL_ATTR_OPS], cmd) {
		return 0, fmt.Errorf("%q family lacks command %d: %w", familyName, cmd, ErrUnavailable)
	}
	return binary.NativeEndian.Uint16(raw), nil
}

// hasOp looks for cmd in the nested CTRL_ATTR_OPS list.
func hasOp(ops []byte, cmd uint8) bool {
	list, err := parseAttrsList(ops)
	if err != nil {
		return false
	}
	for _, op := range list {
		a, err := parseAttrs(op)
		if err != nil {
			continue
		}
		if id, ok := a.u32(unix.CTRL_ATTR_OP_ID); ok && id == uint32(cmd) {
			return true
		}
	}
	return false
}

// parseAttrsList returns every child of a nested array attribute (whose
// children are numbered by position, so a map would keep only one).
func parseAttrsList(b []byte) ([][]byte, error) {
	var out [][]byte
	err := walkAttrs(b, func(_ uint16, v []byte) { out = append(out, v) })
	return out, err
}

// dump runs a netdev dump command, filtered by ifindex where the kernel
// supports it (the result is filtered again by the caller either way).
func dump(cmd uint8, ifindexAttr uint16, ifindex int) ([][]byte, error) {
	var body []byte
	if ifindex > 0 {
		body = u32Attr(ifindexAttr, uint32(ifindex))
	}
	return dumpBody(cmd, body)
}

// dumpBody runs a netdev dump command with the request attributes body.
func dumpBody(cmd uint8, body []byte) ([][]byte, error) {
	c, err := dial()
	if err != nil {
		return nil, err
	}
	defer c.close()
	family, err := c.familyID(cmd)
	if err != nil {
		return nil, err
	}
	msgs, err := c.roundTrip(family, unix.NLM_F_DUMP, cmd, body)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("netdev command %d: %w (%w)", cmd, ErrUnavailable, err)
	}
	if errors.Is(err, unix.ENODEV) {
		return nil, fmt.Errorf("no such device in this network namespace: %w", os.ErrNotExist)
	}
	return msgs, err
}
