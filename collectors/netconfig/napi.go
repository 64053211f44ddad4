package netconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/perfscope/perfscope/collectors/netlinkq"
)

// NAPIConfig is how the interface's receive path is polled: the
// device-wide NAPI settings from sysfs (Linux 5.10+; the values new NAPI
// instances start with) and each NAPI instance's own from the netdev
// netlink family (Linux 6.13+), with the kernel thread of each threaded
// instance and the CPUs it may run on. Nil values were not reported.
type NAPIConfig struct {
	// DeferHardIRQs is /sys/class/net/IF/napi_defer_hard_irqs,
	// GROFlushTimeoutNs gro_flush_timeout (ns) and Threaded threaded (0 or
	// 1; 2 on kernels with threaded busy polling).
	DeferHardIRQs     *int64 `json:"napi_defer_hard_irqs"`
	GROFlushTimeoutNs *int64 `json:"gro_flush_timeout_ns"`
	Threaded          *int64 `json:"threaded"`
	// Instances are the interface's NAPI instances (netdev netlink
	// napi-get); empty for devices without NAPI of their own (loopback,
	// veth without GRO or XDP).
	Instances []NAPIInstance `json:"instances"`
	// Unavailable says why Instances could not be listed ("" when they
	// were).
	Unavailable string `json:"unavailable,omitempty"`
}

// NAPIInstance is one NAPI instance with its polling thread's placement.
type NAPIInstance struct {
	netlinkq.NAPI
	// ThreadCPUs is the Cpus_allowed_list of the instance's kernel thread
	// (threaded NAPI), and ThreadLastCPU the CPU it last ran on; empty and
	// nil without a thread.
	ThreadCPUs    string `json:"thread_cpus,omitempty"`
	ThreadLastCPU *int   `json:"thread_last_cpu,omitempty"`
}

// napi reads the NAPI section of iface (ifindex).
func (s Sources) napi(iface string, ifindex int) NAPIConfig {
	dev := "/sys/class/net/" + iface + "/"
	n := NAPIConfig{
		DeferHardIRQs:     s.intFile(dev + "napi_defer_hard_irqs"),
		GROFlushTimeoutNs: s.intFile(dev + "gro_flush_timeout"),
		Threaded:          s.intFile(dev + "threaded"),
		Instances:         []NAPIInstance{},
	}
	if s.NAPIs == nil {
		n.Unavailable = "no netdev netlink source"
		return n
	}
	list, err := s.NAPIs(ifindex)
	if err != nil {
		n.Unavailable = fmt.Sprintf("netdev netlink napi-get: %v", err)
		if errors.Is(err, netlinkq.ErrUnavailable) {
			n.Unavailable = "this kernel's netdev netlink family cannot list NAPI instances (Linux 6.8+; their settings 6.13+)"
		}
		return n
	}
	for _, inst := range list {
		i := NAPIInstance{NAPI: inst}
		if inst.PID > 0 {
			i.ThreadCPUs, i.ThreadLastCPU = s.threadPlacement(inst.PID)
		}
		n.Instances = append(n.Instances, i)
	}
	return n
}

// threadPlacement reads a kernel thread's allowed CPUs (/proc/PID/status
// Cpus_allowed_list) and the CPU it last ran on (/proc/PID/stat field 39).
func (s Sources) threadPlacement(pid int) (string, *int) {
	var allowed string
	if b, err := s.FS.ReadString(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(b, "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				allowed = strings.TrimSpace(v)
			}
		}
	}
	st, err := s.FS.ReadString(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return allowed, nil
	}
	// The command may hold spaces and parentheses: fields count from the
	// last ')'.
	end := strings.LastIndexByte(st, ')')
	if end < 0 {
		return allowed, nil
	}
	fields := strings.Fields(st[end+1:])
	// fields[0] is field 3 (state); processor is field 39.
	if len(fields) < 37 {
		return allowed, nil
	}
	cpu, err := strconv.Atoi(fields[36])
	if err != nil {
		return allowed, nil
	}
	return allowed, &cpu
}

// intFile reads a file holding one integer; nil when absent or not one.
func (s Sources) intFile(path string) *int64 {
	v, err := s.FS.ReadInt(path)
	if err != nil {
		return nil
	}
	return &v
}
