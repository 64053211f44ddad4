package offcpu

import (
	"testing"

	probe "github.com/perfscope/perfscope/probes/offcpu"
)

// Stacks as the probe records them on Linux 6.18 (kernel frames leaf
// first, from the tests' own waits and a JVM and Go server's), and the
// reason and call site each must get.
func TestClassify(t *testing.T) {
	futex := []string{"futex_do_wait", "__futex_wait", "futex_wait", "do_futex", "__x64_sys_futex", "do_syscall_64", "entry_SYSCALL_64_after_hwframe"}
	for _, c := range []struct {
		name         string
		state        probe.State
		kernel, user []string
		reason       Reason
		site         string
	}{
		{"pthread mutex", probe.Sleeping, futex, []string{"[unknown] (libc.so.6)", "lock_mutex", "wait_for_lock", "worker", "[unknown] (libc.so.6)"}, Lock, "lock_mutex"},
		{"named pthread mutex", probe.Sleeping, futex, []string{"__lll_lock_wait", "pthread_mutex_lock", "take_order", "main"}, Lock, "take_order"},
		{"condition variable", probe.Sleeping, futex, []string{"__futex_abstimed_wait_common", "__pthread_cond_wait", "queue_pop", "worker"}, Condition, "queue_pop"},
		{"java pool worker waiting for a task", probe.Sleeping, futex, []string{"__futex_abstimed_wait_common", "___pthread_cond_wait", "Parker::park", "Unsafe_Park",
			"jdk/internal/misc/Unsafe.park_[j]", "java/util/concurrent/locks/LockSupport.park_[j]", "java/util/concurrent/SynchronousQueue$TransferStack.transfer_[j]",
			"java/util/concurrent/ThreadPoolExecutor.getTask_[j]"}, Idle, "java/util/concurrent/SynchronousQueue$TransferStack.transfer_[j]"},
		{"java lock", probe.Sleeping, futex, []string{"___pthread_cond_wait", "Parker::park", "jdk/internal/misc/Unsafe.park_[j]",
			"java/util/concurrent/locks/AbstractQueuedSynchronizer.acquire_[j]", "java/util/concurrent/locks/ReentrantLock.lock_[j]", "com/example/Cache.get_[j]"},
			Lock, "java/util/concurrent/locks/AbstractQueuedSynchronizer.acquire_[j]"},
		{"java synchronized", probe.Sleeping, futex, []string{"__futex_abstimed_wait_common", "ObjectMonitor::EnterI", "ObjectMonitor::enter", "com/example/Stats.add_[j]"}, Lock, "com/example/Stats.add_[j]"},
		{"go idle M", probe.Sleeping, futex, []string{"runtime.futex.abi0", "runtime.futexsleep", "runtime.notesleep", "runtime.mPark", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"}, Idle, "runtime.findRunnable"},
		{"udp recv", probe.Sleeping, []string{"__skb_wait_for_more_packets", "__skb_recv_udp", "udp_recvmsg", "sock_recvmsg", "__sys_recvfrom", "__x64_sys_recvfrom", "do_syscall_64"}, []string{"recv"}, SocketRead, "__skb_wait_for_more_packets_[k]"},
		{"tcp read", probe.Sleeping, []string{"wait_woken", "sk_wait_data", "tcp_recvmsg_locked", "tcp_recvmsg", "inet_recvmsg", "sock_read_iter", "vfs_read"}, []string{"read", "handle_conn", "serve"}, SocketRead, "handle_conn"},
		{"accept", probe.Sleeping, []string{"inet_csk_wait_for_connect", "inet_csk_accept", "inet_accept", "do_accept"}, []string{"accept4", "accept_loop"}, SocketAccept, "accept_loop"},
		{"epoll", probe.Sleeping, []string{"schedule_hrtimeout_range_clock", "ep_poll", "do_epoll_wait", "__x64_sys_epoll_wait"}, []string{"epoll_wait", "event_loop"}, Poll, "event_loop"},
		{"go netpoll", probe.Sleeping, []string{"schedule_hrtimeout_range_clock", "ep_poll", "do_epoll_pwait.part.0"}, []string{"internal/runtime/syscall.Syscall6", "runtime.netpoll", "runtime.findRunnable", "runtime.schedule"}, Poll, "runtime.findRunnable"},
		{"disk read", probe.Uninterruptible, []string{"io_schedule", "folio_wait_bit_common", "filemap_get_pages", "filemap_read", "vfs_read"}, []string{"read", "load_index"}, DiskIO, "load_index"},
		{"page fault reading a file", probe.Uninterruptible, []string{"io_schedule", "folio_wait_bit_common", "filemap_fault", "__do_fault", "do_fault", "__handle_mm_fault", "handle_mm_fault", "do_user_addr_fault", "exc_page_fault", "asm_exc_page_fault"},
			[]string{"scan_table"}, PageFault, "scan_table"},
		{"nanosleep", probe.Sleeping, []string{"hrtimer_nanosleep", "common_nsleep", "__x64_sys_clock_nanosleep"}, []string{"clock_nanosleep", "sleep_us", "hold_lock"}, Sleep, "sleep_us"},
		{"timed condition wait sleeps on its timer", probe.Sleeping, futex, []string{"__pthread_cond_timedwait", "poll_queue"}, Condition, "poll_queue"},
		{"pipe", probe.Sleeping, []string{"pipe_read", "vfs_read", "ksys_read"}, []string{"read", "[unknown] (bash)"}, Pipe, "pipe_read_[k]"},
		{"waiting for a child", probe.Sleeping, []string{"do_wait", "kernel_wait4", "__do_sys_wait4"}, []string{"wait4"}, Child, "do_wait_[k]"},
		{"kernel mutex", probe.Uninterruptible, []string{"schedule_preempt_disabled", "__mutex_lock.constprop.0", "__mutex_lock_slowpath", "mutex_lock", "rtnl_lock", "devinet_ioctl"}, nil, Lock, "schedule_preempt_disabled_[k]"},
		{"preempted", probe.Runnable, []string{"preempt_schedule_irq", "asm_sysvec_apic_timer_interrupt"}, []string{"spin_without_blocking"}, Preempted, "spin_without_blocking"},
		{"kernel worker", probe.Idle, []string{"worker_thread", "kthread", "ret_from_fork"}, nil, Idle, "worker_thread_[k]"},
		{"user stacks only", probe.Sleeping, nil, []string{"epoll_wait", "event_loop"}, Poll, "event_loop"},
		{"nothing known", probe.Sleeping, []string{"some_driver_wait"}, nil, Other, "some_driver_wait_[k]"},
	} {
		r := Classify(c.state, c.kernel, c.user)
		site := Site(r, c.kernel, c.user)
		if r != c.reason || site != c.site {
			t.Errorf("%s: %s at %q, want %s at %q", c.name, r, site, c.reason, c.site)
		}
	}
}

func TestWakerContext(t *testing.T) {
	for _, c := range []struct {
		name     string
		kernel   []string
		kind, by string
	}{
		{"a holder releasing a futex", []string{"bpf_prog_94599602c847ee67_btf_sched_waking", "bpf_trace_run1", "try_to_wake_up", "wake_up_q", "futex_wake", "do_futex",
			"__x64_sys_futex", "do_syscall_64", "entry_SYSCALL_64_after_hwframe"}, WakerThread, "futex_wake"},
		{"a datagram delivered by the sender's softirq", []string{"_einittext", "bpf_trace_run1", "try_to_wake_up", "autoremove_wake_function", "__wake_up_common",
			"__wake_up_sync_key", "sock_def_readable", "__udp_enqueue_schedule_skb", "udp_queue_rcv_one_skb", "udp_unicast_rcv_skb", "ip_protocol_deliver_rcu",
			"ip_local_deliver_finish", "__netif_receive_skb_one_core", "process_backlog", "__napi_poll", "net_rx_action", "handle_softirqs", "do_softirq.part.0",
			"__local_bh_enable_ip", "__dev_queue_xmit", "ip_finish_output2", "ip_output", "udp_sendmsg", "__sys_sendto", "do_syscall_64"}, WakerSoftirq, "sock_def_readable"},
		{"a timer interrupting another process", []string{"try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues", "hrtimer_interrupt", "__sysvec_apic_timer_interrupt",
			"sysvec_apic_timer_interrupt", "asm_sysvec_apic_timer_interrupt", "exc_page_fault"}, WakerInterrupt, "hrtimer_wakeup"},
		{"no stack", nil, WakerThread, ""},
	} {
		kind, by := WakerContext(c.kernel)
		if kind != c.kind || by != c.by {
			t.Errorf("%s: %s by %q, want %s by %q", c.name, kind, by, c.kind, c.by)
		}
	}
}

func TestPoolName(t *testing.T) {
	for in, want := range map[string]string{
		"pool-2-thread-7": "pool-2-thread-*", "pool-2-thread-1": "pool-2-thread-*", "grpc-default-executor-3": "grpc-default-executor-*",
		"GC Thread#1": "GC Thread#*", "http-nio-8080-e": "http-nio-8080-e", "C2 CompilerThre": "C2 CompilerThre", "worker12": "worker*",
		"kworker/1:2": "kworker/*", "kworker/u8:3-events_unbound": "kworker/*", "ksoftirqd/0": "ksoftirqd/*", "caddy": "caddy",
		"12345": "12345", "": "", "a/b/c": "a/*", "x y/1": "x y/*",
	} {
		if got := PoolName(in); got != want {
			t.Errorf("PoolName(%q) = %q, want %q", in, got, want)
		}
	}
	if k := poolOf(17, 17, "kworker/0:1"); k.pid != 0 {
		t.Errorf("a kernel worker's pool is its own process's: %+v", k)
	}
	if k := poolOf(17, 18, "worker/1"); k.pid != 17 {
		t.Errorf("a user thread named with a slash joined the kernel's pools: %+v", k)
	}
}
