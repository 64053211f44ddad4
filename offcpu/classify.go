// Package offcpu turns what the off-CPU probe (probes/offcpu) counted into
// evidence: every wait named and classified by why the thread waited (a
// lock, a socket, a timer...), at which call site and woken by whom;
// threads grouped into pools with their time on CPU, runnable and blocked;
// run-queue latency as histograms with percentiles; and the off-CPU
// profile as a flame graph in microseconds. Measure runs the whole thing
// for a process or the whole system; Build and the functions it calls are
// pure, tested from fixtures.
//
// The method is Brendan Gregg's off-CPU analysis (brendangregg.com,
// "Off-CPU Analysis"; bcc's offcputime and offwaketime) with bcc's
// runqlat for the run queue.
package offcpu

import (
	"strings"

	"github.com/perfscope/perfscope/collectors/symbols"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// Reason is why a thread waited off CPU, read from its stacks.
type Reason string

// The reasons, stable: evidence, rules and scripts name them.
const (
	// Preempted: the thread was runnable and lost the CPU (state R).
	Preempted Reason = "preempted"
	// Lock: a futex (pthread mutex, a runtime's lock, Java's synchronized)
	// or a kernel mutex/rwsem.
	Lock Reason = "lock"
	// Condition: a condition variable or a park (pthread_cond_wait,
	// Java's LockSupport.park outside a lock): a thread waiting for
	// another to signal it, usually for work or a result.
	Condition Reason = "condition"
	// Idle: a worker with nothing to do: a kernel thread in TASK_IDLE, a
	// Go runtime M parked by the scheduler, a Java pool thread in
	// getTask/take.
	Idle Reason = "idle"
	// SocketRead, SocketAccept, SocketWrite: blocked on a socket (data to
	// read, a connection, send buffer space or a connect).
	SocketRead   Reason = "socket-read"
	SocketAccept Reason = "socket-accept"
	SocketWrite  Reason = "socket-write"
	// Poll: epoll_wait, poll, select (an event loop waiting for work).
	Poll Reason = "poll"
	// DiskIO: waiting for block I/O (io_schedule, a page or buffer lock).
	DiskIO Reason = "disk-io"
	// PageFault: a page fault that slept (its I/O or lock is the fault's).
	PageFault Reason = "page-fault"
	// Sleep: a timer: nanosleep, usleep, a timed wait with nothing else.
	Sleep Reason = "sleep"
	// Pipe: reading or writing a pipe.
	Pipe Reason = "pipe"
	// Child: waiting for a child process (wait4, waitid).
	Child Reason = "child"
	// Signal: waiting for a signal (pause, sigsuspend, sigtimedwait).
	Signal Reason = "signal"
	// Other: none of the above.
	Other Reason = "other"
)

// kernelReasons maps kernel functions to the reason a wait through them
// has. The innermost (leaf-most) frame listed decides, except that a page
// fault anywhere on the stack makes the wait a page fault's.
var kernelReasons = map[string]Reason{
	// Futexes and kernel sleeping locks.
	"futex_wait": Lock, "__futex_wait": Lock, "futex_do_wait": Lock, "futex_wait_queue": Lock,
	"futex_wait_queue_me": Lock, "futex_wait_multiple": Lock, "futex_lock_pi": Lock,
	"futex_wait_requeue_pi": Lock, "__mutex_lock": Lock, "__mutex_lock_slowpath": Lock,
	"mutex_lock": Lock, "mutex_lock_killable": Lock, "mutex_lock_interruptible": Lock,
	"schedule_preempt_disabled": Lock, "rwsem_down_read_slowpath": Lock,
	"rwsem_down_write_slowpath": Lock, "down_read": Lock, "down_write": Lock,
	"down_read_killable": Lock, "down_write_killable": Lock, "__down": Lock,
	"__down_common": Lock, "__down_interruptible": Lock, "rt_mutex_slowlock": Lock,
	"rt_mutex_slowlock_block": Lock, "percpu_rwsem_wait": Lock, "__percpu_down_read": Lock,
	// Sockets.
	"sk_wait_data": SocketRead, "__skb_wait_for_more_packets": SocketRead,
	"__skb_recv_datagram": SocketRead, "__skb_recv_udp": SocketRead, "udp_recvmsg": SocketRead,
	"udpv6_recvmsg": SocketRead, "tcp_recvmsg": SocketRead, "tcp_recvmsg_locked": SocketRead,
	"unix_stream_read_generic": SocketRead, "unix_dgram_recvmsg": SocketRead,
	"netlink_recvmsg": SocketRead, "packet_recvmsg": SocketRead, "sock_recvmsg": SocketRead,
	"inet_csk_accept": SocketAccept, "inet_csk_wait_for_connect": SocketAccept,
	"unix_accept": SocketAccept, "sk_stream_wait_memory": SocketWrite,
	"sk_stream_wait_connect": SocketWrite, "sock_alloc_send_pskb": SocketWrite,
	"__inet_stream_connect": SocketWrite, "unix_wait_for_peer": SocketWrite,
	// Event loops.
	"ep_poll": Poll, "do_epoll_wait": Poll, "do_poll": Poll, "do_sys_poll": Poll,
	"do_select": Poll, "core_sys_select": Poll, "io_cqring_wait": Poll,
	// Block I/O.
	"io_schedule": DiskIO, "io_schedule_timeout": DiskIO, "bit_wait_io": DiskIO,
	"folio_wait_bit_common": DiskIO, "folio_wait_bit": DiskIO, "__folio_lock": DiskIO,
	"__folio_lock_killable": DiskIO, "wait_on_page_bit_common": DiskIO, "__lock_page": DiskIO,
	"__wait_on_buffer": DiskIO, "submit_bio_wait": DiskIO, "blk_mq_get_tag": DiskIO,
	"jbd2_log_wait_commit": DiskIO, "blkdev_issue_flush": DiskIO,
	// Timers.
	"hrtimer_nanosleep": Sleep, "do_nanosleep": Sleep, "common_nsleep": Sleep,
	"msleep": Sleep, "msleep_interruptible": Sleep, "usleep_range_state": Sleep,
	// Pipes, children, signals.
	"pipe_read": Pipe, "pipe_write": Pipe, "pipe_wait_readable": Pipe, "pipe_wait_writable": Pipe,
	"do_wait": Child, "kernel_wait4": Child, "kernel_waitid": Child,
	"sys_pause": Signal, "__x64_sys_pause": Signal, "sigsuspend": Signal, "do_sigtimedwait": Signal,
	// Kernel workers with nothing to do.
	"worker_thread": Idle, "smpboot_thread_fn": Idle, "kthread_worker_fn": Idle,
	"rcu_gp_kthread": Idle, "kswapd": Idle, "khugepaged": Idle,
}

// timedWaits sleep on a timer for any kind of wait (epoll_wait with a
// timeout, a socket's SO_RCVTIMEO): they make a wait a sleep only when no
// other frame says what it waited for.
var timedWaits = map[string]bool{
	"schedule_timeout": true, "schedule_hrtimeout_range": true, "schedule_hrtimeout_range_clock": true,
	"schedule_hrtimeout": true, "wait_woken": true,
}

// pageFaultFrames make a wait a page fault's wherever they are.
var pageFaultFrames = map[string]bool{
	"asm_exc_page_fault": true, "exc_page_fault": true, "do_user_addr_fault": true,
	"handle_mm_fault": true, "__handle_mm_fault": true, "do_page_fault": true,
}

// userReasons refine a futex wait (which the kernel sees as a lock) from
// the application's frames, matched by substring on the frame's name, in
// order: a Java pool thread taking from its queue is idle, not contending.
var userReasons = []struct {
	contains string
	reason   Reason
}{
	// Java (frames through the perf map, "_[j]"): pool workers waiting
	// for tasks, then lock acquisition, then plain parks and waits.
	{"ThreadPoolExecutor.getTask", Idle},
	{"LinkedBlockingQueue.take", Idle},
	{"LinkedBlockingQueue.poll", Idle},
	{"SynchronousQueue", Idle},
	{"ArrayBlockingQueue.take", Idle},
	{"DelayedWorkQueue.take", Idle},
	{"ForkJoinPool.awaitWork", Idle},
	{"AbstractQueuedSynchronizer.acquire", Lock},
	{"ReentrantLock.lock", Lock},
	{"ObjectMonitor::enter", Lock},
	{"ObjectMonitor::EnterI", Lock},
	{"ObjectMonitor::wait", Condition},
	{"Object.wait", Condition},
	{"LockSupport.park", Condition},
	{"Parker::park", Condition},
	// Go's runtime: an M parked by the scheduler is idle; its own locks
	// are locks.
	{"runtime.mPark", Idle},
	{"runtime.stopm", Idle},
	{"runtime.findRunnable", Idle},
	{"runtime.notesleep", Idle},
	{"runtime.lock2", Lock},
	// C and C++.
	{"pthread_cond_", Condition},
	{"__pthread_cond_", Condition},
	{"condition_variable", Condition},
	{"sem_wait", Condition},
	{"sem_timedwait", Condition},
	{"pthread_mutex_", Lock},
	{"__lll_lock_wait", Lock},
	{"pthread_rwlock_", Lock},
	{"pthread_join", Child},
}

// userOnlyReasons classify a wait with no kernel stack (--user-only) from
// the libc or runtime function it called, by exact name.
var userOnlyReasons = map[string]Reason{
	"nanosleep": Sleep, "clock_nanosleep": Sleep, "usleep": Sleep, "sleep": Sleep,
	"__nanosleep": Sleep, "__clock_nanosleep": Sleep,
	"recv": SocketRead, "recvfrom": SocketRead, "recvmsg": SocketRead, "recvmmsg": SocketRead,
	"__libc_recv": SocketRead, "__libc_recvfrom": SocketRead, "read": Other,
	"accept": SocketAccept, "accept4": SocketAccept, "send": SocketWrite, "sendto": SocketWrite,
	"sendmsg": SocketWrite, "connect": SocketWrite,
	"epoll_wait": Poll, "epoll_pwait": Poll, "poll": Poll, "ppoll": Poll, "select": Poll, "pselect": Poll,
	"waitpid": Child, "wait4": Child, "waitid": Child, "pause": Signal, "sigsuspend": Signal,
}

// Frames a waiting call site is never: the lock, wait and syscall
// implementations between the application and the kernel. By prefix (C
// and runtime names), by substring (qualified Java and C++ names) and by
// exact name (libc's syscall wrappers, whose names an application's own
// functions may start with).
var (
	primitivePrefixes = []string{
		"pthread_", "__pthread_", "___pthread_", "__lll_", "lll_", "futex", "__futex", "syscall",
		"__GI_", "__libc_", "do_futex_wait", "__new_sem_wait", "sem_wait", "sem_timedwait",
		"runtime.futex", "runtime.lock", "runtime.notesleep", "runtime.notetsleep", "runtime.semasleep",
		"runtime.mPark", "runtime.stopm", "runtime.usleep", "runtime.netpoll", "runtime.epollwait",
		"runtime/internal/syscall.", "internal/runtime/syscall.", "syscall.Syscall", "syscall.RawSyscall",
		"__nanosleep", "__clock_nanosleep", "clock_nanosleep", "nanosleep",
	}
	primitiveParts = []string{
		"Unsafe.park", "Unsafe_Park", "LockSupport.park", "Parker::park", "JVM_", "ObjectMonitor::", "PlatformEvent::",
		"PlatformParker", "std::condition_variable", "std::mutex", "std::__",
	}
	primitiveNames = map[string]bool{
		"recv": true, "recvfrom": true, "recvmsg": true, "recvmmsg": true, "send": true, "sendto": true,
		"sendmsg": true, "sendmmsg": true, "accept": true, "accept4": true, "connect": true, "read": true,
		"write": true, "readv": true, "writev": true, "pread64": true, "pwrite64": true, "poll": true,
		"ppoll": true, "select": true, "pselect": true, "epoll_wait": true, "epoll_pwait": true,
		"epoll_pwait2": true, "usleep": true, "sleep": true, "pause": true, "wait4": true, "waitpid": true,
		"waitid": true, "sigsuspend": true, "sigtimedwait": true, "fsync": true, "fdatasync": true,
		"open": true, "openat": true, "__open64": true, "ioctl": true, "flock": true, "fcntl": true,
	}
)

// Classify says why a wait happened from its state and stacks (leaf
// first; kernel frames without the "_[k]" suffix).
func Classify(state probe.State, kernel, user []string) Reason {
	switch state {
	case probe.Runnable:
		return Preempted
	case probe.Idle:
		return Idle
	}
	reason, found, timed := Other, false, false
	for _, f := range kernel {
		if pageFaultFrames[f] {
			return PageFault
		}
		if !found {
			if r, ok := kernelReasons[f]; ok {
				reason, found = r, true
			}
			timed = timed || timedWaits[f]
		}
	}
	if !found && timed {
		reason, found = Sleep, true
	}
	if !found && len(kernel) == 0 {
		for _, f := range user {
			if r, ok := userOnlyReasons[f]; ok {
				reason, found = r, true
				break
			}
		}
	}
	if reason == Lock || reason == Sleep || !found {
		// A futex (or a timed futex, which the kernel sleeps in as a
		// timer) may be a condition, a park or an idle runtime thread:
		// the application's frames tell.
		for _, ur := range userReasons {
			for _, f := range user {
				if strings.Contains(f, ur.contains) && !(reason == Sleep && ur.reason == Lock) {
					return ur.reason
				}
			}
		}
	}
	return reason
}

// Site is the waiting call site: the innermost user frame that is not a
// lock, wait or syscall wrapper and has a name; else the kernel function
// that decided the reason; else the innermost kernel frame.
func Site(reason Reason, kernel, user []string) string {
	for _, f := range user {
		if named(f) && !isPrimitive(f) {
			return f
		}
	}
	for _, f := range kernel {
		if kernelReasons[f] == reason || reason == PageFault && pageFaultFrames[f] {
			return f + symbols.KernelSuffix
		}
	}
	for _, f := range user {
		if named(f) {
			return f
		}
	}
	if len(kernel) > 0 {
		return kernel[0] + symbols.KernelSuffix
	}
	return symbols.Unknown
}

func named(f string) bool {
	return f != "" && !strings.HasPrefix(f, symbols.Unknown) && !strings.HasPrefix(f, "0x")
}

func isPrimitive(f string) bool {
	name := strings.TrimSuffix(f, symbols.JITSuffix)
	if primitiveNames[name] {
		return true
	}
	for _, p := range primitivePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, p := range primitiveParts {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

// WakerKind is the context a waker ran in.
const (
	WakerThread    = "thread"
	WakerSoftirq   = "softirq"
	WakerInterrupt = "interrupt"
)

// wakeHelpers are the wakeup machinery between what woke a thread and
// try_to_wake_up.
var wakeHelpers = map[string]bool{
	"try_to_wake_up": true, "wake_up_process": true, "wake_up_q": true, "wake_up_state": true,
	"autoremove_wake_function": true, "default_wake_function": true, "woken_wake_function": true,
	"pollwake": true, "ep_autoremove_wake_function": true, "__wake_up_common": true,
	"__wake_up_common_lock": true, "__wake_up": true, "__wake_up_sync_key": true,
	"__wake_up_sync": true, "__wake_up_locked": true, "__wake_up_locked_key": true,
	"__wake_up_locked_sync_key": true, "wake_up_bit": true, "__wake_up_bit": true, "complete": true,
	"swake_up_one": true, "swake_up_locked": true, "wake_up_var": true, "ep_poll_callback": true,
	"wake_up_new_task": true, "ttwu_do_activate": true, "signal_wake_up_state": true,
}

var softirqFrames = map[string]bool{
	"handle_softirqs": true, "__do_softirq": true, "do_softirq": true, "net_rx_action": true,
	"net_tx_action": true, "run_ksoftirqd": true, "run_timer_softirq": true, "tasklet_action": true,
	"tasklet_action_common": true, "rcu_core": true, "blk_done_softirq": true, "irq_poll_softirq": true,
}

var interruptPrefixes = []string{"asm_sysvec_", "__sysvec_", "sysvec_", "asm_common_interrupt", "common_interrupt",
	"hrtimer_interrupt", "__hrtimer_run_queues", "irq_exit", "__irq_exit_rcu", "handle_irq_event", "asm_exc_nmi"}

// WakerContext reads a waker's kernel stack (leaf first): the kind of
// context it ran in and the kernel function that woke the thread (the
// first past the wakeup machinery). A stack cut by the probe's tracing
// frames (bpf_prog_*, bpf_trace_run*) starts after them.
func WakerContext(kernel []string) (kind, by string) {
	kernel = trimWakerLeaf(kernel)
	kind = WakerThread
	for _, f := range kernel {
		if by == "" && !wakeHelpers[f] {
			by = f
		}
		if softirqFrames[f] {
			return WakerSoftirq, by
		}
		for _, p := range interruptPrefixes {
			if strings.HasPrefix(f, p) {
				return WakerInterrupt, by
			}
		}
		if strings.HasPrefix(f, "entry_SYSCALL") || f == "do_syscall_64" || f == "ret_from_fork" || f == "ret_from_fork_asm" {
			return WakerThread, by
		}
	}
	return kind, by
}

// trimWakerLeaf drops the probe's own frames at the leaf of a waker's
// stack: everything up to try_to_wake_up, which every wakeup calls.
func trimWakerLeaf(kernel []string) []string {
	for i, f := range kernel {
		if f == "try_to_wake_up" {
			return kernel[i:]
		}
	}
	return trimTracing(kernel)
}

// trimWaitLeaf drops the tracing and scheduler frames at the leaf of a
// wait's kernel stack, so that stacks taken at the switch-out (raw_tp,
// classic tracepoints) and from the sleeping task at the switch-in
// (tp_btf) read the same.
func trimWaitLeaf(kernel []string) []string {
	kernel = trimTracing(kernel)
	for len(kernel) > 0 && (kernel[0] == "__schedule" || kernel[0] == "schedule") {
		kernel = kernel[1:]
	}
	return kernel
}

func trimTracing(kernel []string) []string {
	for len(kernel) > 0 {
		f := kernel[0]
		if strings.HasPrefix(f, "bpf_prog_") || strings.HasPrefix(f, "bpf_trace_run") || strings.HasPrefix(f, "__bpf_trace_") ||
			strings.HasPrefix(f, "__traceiter_") || strings.HasPrefix(f, "trace_") || strings.HasPrefix(f, symbols.Unknown) ||
			f == "_einittext" || strings.HasPrefix(f, "__bpf_prog_run") || strings.HasPrefix(f, "bpf_trampoline") {
			kernel = kernel[1:]
			continue
		}
		break
	}
	return kernel
}
