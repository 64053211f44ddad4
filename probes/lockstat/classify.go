package lockstat

import (
	"fmt"
	"strings"
)

// Class is what a contended lock protects, judged from the waiter's stack.
type Class string

const (
	// SocketReceiveQueue: a socket's receive queue lock
	// (sk_receive_queue.lock / udp reader_queue.lock), taken by softirqs
	// enqueuing datagrams and by the reader dequeuing them.
	SocketReceiveQueue Class = "socket-receive-queue"
	// SocketWakeup: the socket wait-queue lock, taken by sock_def_readable
	// to wake the reader of every enqueued datagram, and by the reader
	// when it goes to sleep on it.
	SocketWakeup Class = "socket-wakeup"
	// SocketLock: the socket's own lock (sk_lock.slock: lock_sock,
	// release_sock).
	SocketLock Class = "socket-lock"
	// QdiscRootLock: the root lock of a device's qdisc (__dev_xmit_skb,
	// __qdisc_run).
	QdiscRootLock Class = "qdisc-root-lock"
	// TXQueueLock: a TX queue's _xmit_lock (HARD_TX_LOCK around the
	// driver's transmit).
	TXQueueLock Class = "tx-queue-xmit-lock"
	// Other: any other lock.
	Other Class = "other"
	// NotSampled: contention of a lock kind none of whose stacks was
	// sampled in the window (see Options.StackEvery): its call site is
	// unknown.
	NotSampled Class = "unsampled"
)

// classOf maps the kernel functions that take (or directly wrap the taking
// of) each lock to its class. The innermost frame found here decides.
var classOf = map[string]Class{
	// Receive queue: enqueue in softirq, dequeue and memory release in the
	// reader.
	"__udp_enqueue_schedule_skb": SocketReceiveQueue,
	"udp_rmem_release":           SocketReceiveQueue,
	"__skb_recv_udp":             SocketReceiveQueue,
	"__udp_queue_rcv_skb":        SocketReceiveQueue,
	"udp_queue_rcv_one_skb":      SocketReceiveQueue,
	"__first_packet_length":      SocketReceiveQueue,
	"first_packet_length":        SocketReceiveQueue,
	"__skb_try_recv_datagram":    SocketReceiveQueue,
	"__skb_recv_datagram":        SocketReceiveQueue,
	"skb_recv_datagram":          SocketReceiveQueue,
	"__sock_queue_rcv_skb":       SocketReceiveQueue,
	"sock_queue_rcv_skb_reason":  SocketReceiveQueue,
	"skb_free_datagram_locked":   SocketReceiveQueue,
	// The socket lock.
	"lock_sock_nested": SocketLock,
	"__lock_sock":      SocketLock,
	"release_sock":     SocketLock,
	"__release_sock":   SocketLock,
	// Transmit: the root lock is taken in __dev_xmit_skb (inlined into
	// __dev_queue_xmit) and by __qdisc_run's callers; HARD_TX_LOCK in
	// sch_direct_xmit and on the no-qdisc path of __dev_queue_xmit, which
	// the stack cannot tell apart from the root lock (see sch_direct_xmit).
	"__dev_xmit_skb":      QdiscRootLock,
	"__dev_queue_xmit":    QdiscRootLock,
	"__qdisc_run":         QdiscRootLock,
	"qdisc_run":           QdiscRootLock,
	"net_tx_action":       QdiscRootLock,
	"sch_direct_xmit":     TXQueueLock,
	"dev_hard_start_xmit": TXQueueLock,
	"__netif_tx_lock":     TXQueueLock,
	"netif_tx_lock":       TXQueueLock,
}

// wakeupLockers take a wait-queue lock (or, for epoll waiters, the epoll
// instance's lock): socket wakeup when a socket callback is further out,
// any other wakeup otherwise.
var wakeupLockers = map[string]bool{
	"__wake_up_common_lock": true,
	"__wake_up_sync_key":    true,
	"__wake_up_sync":        true,
	"__wake_up":             true,
	"ep_poll_callback":      true,
}

// socketWakers are the socket callbacks that wake readers (data ready) and
// writers (space freed).
var socketWakers = map[string]bool{
	"sock_def_readable":          true,
	"sock_def_write_space":       true,
	"sock_def_write_space_wfree": true,
	"sock_wfree":                 true,
}

// waitQueueJoiners take a wait-queue lock to add or remove a sleeper: the
// reader's side of the socket wakeup lock when a socket receive function
// is further out (__skb_wait_for_more_packets under __skb_recv_udp), so a
// reader going to sleep contends with the softirq waking it.
var waitQueueJoiners = map[string]bool{
	"prepare_to_wait_exclusive": true,
	"prepare_to_wait":           true,
	"prepare_to_wait_event":     true,
	"finish_wait":               true,
	"add_wait_queue":            true,
	"add_wait_queue_exclusive":  true,
	"remove_wait_queue":         true,
}

// socketSleepers are the socket receive functions that sleep on the
// socket's wait queue.
var socketSleepers = map[string]bool{
	"__skb_wait_for_more_packets": true,
	"__skb_recv_udp":              true,
	"__skb_recv_datagram":         true,
	"sk_wait_data":                true,
}

// skbQueueLockers take an sk_buff_head lock of any queue: a socket's
// receive queue only when a socket receive function is further out.
var skbQueueLockers = map[string]bool{
	"skb_queue_tail":    true,
	"skb_dequeue":       true,
	"skb_queue_head":    true,
	"skb_queue_purge":   true,
	"__skb_queue_purge": true,
}

// lockPrimitive reports frames that belong to the locking code itself or
// to the tracing machinery that recorded the stack, not to the locker.
func lockPrimitive(name string) bool {
	for _, p := range []string{"_raw_", "__raw_", "queued_", "native_queued_", "__pv_queued_", "do_raw_",
		"mutex_lock", "__mutex_lock", "rwsem_", "down_read", "down_write", "rt_mutex", "rtlock_",
		"percpu_down", "__percpu_down", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_prog_",
		"_einittext", "0x"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Classify names the lock a waiter contended on from its stack's function
// names, innermost first. The locker — the first frame past the locking
// primitives — decides which lock it was: a scheduler run-queue lock taken
// while waking a socket's reader is scheduler contention, not socket
// contention.
func Classify(frames []string) Class {
	for i, f := range frames {
		name := BaseName(f)
		if lockPrimitive(name) {
			continue
		}
		outer := frames[i+1:]
		switch {
		case wakeupLockers[name]:
			if outerHasAny(outer, socketWakers) {
				return SocketWakeup
			}
			return Other
		case waitQueueJoiners[name]:
			if outerHasAny(outer, socketSleepers) {
				return SocketWakeup
			}
			return Other
		case skbQueueLockers[name]:
			if c := outerClass(outer); c == SocketReceiveQueue {
				return c
			}
			return Other
		}
		if c, ok := classOf[name]; ok {
			return c
		}
		return Other
	}
	return Other
}

func outerHasAny(frames []string, fns map[string]bool) bool {
	for _, f := range frames {
		if fns[BaseName(f)] {
			return true
		}
	}
	return false
}

func outerClass(frames []string) Class {
	for _, f := range frames {
		if c, ok := classOf[BaseName(f)]; ok {
			return c
		}
	}
	return Other
}

// IsSocketClass reports whether contention of class c is on a lock inside
// a socket (SocketWaits names the socket).
func IsSocketClass(c Class) bool {
	return c == SocketReceiveQueue || c == SocketWakeup || c == SocketLock
}

// KernelResolver names kernel addresses: symbols.KernelTable (a batch
// named by the kernel's own lookup or /proc/kallsyms) and
// *symbols.KernelSymbols (/proc/kallsyms) are two.
type KernelResolver interface {
	Resolve(addr uint64) (name, module string, ok bool)
}

// Symbolize names a stack's frames, innermost first; unknown addresses
// become "0x…". Module symbols get their module: "fn [mod]". Frames of
// the tracing machinery that recorded the stack (the BPF program and
// bpf_trace_run*, innermost on tp_btf/raw_tp) are dropped.
func Symbolize(ips []uint64, r KernelResolver) []string {
	out := make([]string, len(ips))
	tracing := 0
	for i, ip := range ips {
		name, module, ok := r.Resolve(ip)
		switch {
		case !ok:
			out[i] = fmt.Sprintf("%#x", ip)
		case module != "":
			out[i] = name + " [" + module + "]"
		default:
			out[i] = name
		}
		if ok && (strings.HasPrefix(name, "bpf_trace_run") || strings.HasPrefix(name, "__bpf_trace_") || strings.HasPrefix(name, "__traceiter_")) {
			tracing = i + 1
		}
	}
	return out[tracing:]
}

// BaseName strips the compiler's clone suffixes (".isra.0",
// ".constprop.0", ".cold") and a "+0x1a/0x80" offset from a kernel symbol.
func BaseName(sym string) string {
	if i := strings.IndexAny(sym, ".+ "); i > 0 {
		sym = sym[:i]
	}
	return sym
}
