package evidence

import (
	"sort"
	"strings"
)

// KernelGroup is a set of kernel functions Makita's talk found on the receive
// path and removed one by one, each worth a measured gain.
type KernelGroup struct {
	Name string
	// Exact names and prefixes (ending in "*") of kernel functions.
	Functions []string
	// Under, when set, counts a sample only if one of these functions is
	// also on its stack (spin-lock frames are only "qdisc locks" below the
	// transmit path).
	Under []string
}

// KernelGroups are the function groups the udp report measures.
var KernelGroups = []KernelGroup{
	{Name: "gro", Functions: []string{"dev_gro_receive", "napi_gro_receive", "udp_gro_receive", "inet_gro_receive", "gro_receive_skb", "napi_gro_complete"}},
	{Name: "netfilter", Functions: []string{"nf_hook_slow", "ipt_do_table", "nft_do_chain", "ip6t_do_table", "nf_conntrack_in"}},
	{Name: "fib-validation", Functions: []string{"fib_validate_source", "__fib_validate_source", "fib_table_lookup"}},
	{Name: "audit", Functions: []string{"audit_*", "__audit_*"}},
	{Name: "ip-ident", Functions: []string{"__ip_select_ident", "ip_idents_reserve"}},
	{Name: "slab", Functions: []string{"kmem_cache_*", "__kmem_cache_*", "kmalloc_reserve", "__kmalloc*", "kfree", "kfree_skbmem"}},
	{Name: "qdisc-lock", Functions: []string{"queued_spin_lock_slowpath", "native_queued_spin_lock_slowpath", "_raw_spin_lock", "_raw_spin_lock_bh"},
		Under: []string{"__dev_queue_xmit", "sch_direct_xmit", "__qdisc_run", "__dev_xmit_skb"}},
	{Name: "socket-lock", Functions: []string{"queued_spin_lock_slowpath", "native_queued_spin_lock_slowpath", "_raw_spin_lock", "_raw_spin_lock_irqsave", "_raw_spin_lock_bh"},
		Under: []string{"__udp_enqueue_schedule_skb", "udp_rmem_release", "__skb_recv_udp", "sock_def_readable", "__udp_queue_rcv_skb"}},
}

// ProfileSample is one stack of an on-CPU profile with its count.
type ProfileSample struct {
	CPU int
	// Frames are root-first names; kernel frames may carry "_[k]".
	Frames []string
	Count  uint64
}

func matches(frame string, patterns []string) bool {
	frame = strings.TrimSuffix(frame, "_[k]")
	// Strip a module or offset annotation ("nf_hook_slow [nf_tables]").
	if i := strings.IndexAny(frame, " +"); i > 0 {
		frame = frame[:i]
	}
	for _, p := range patterns {
		if strings.HasSuffix(p, "*") {
			if strings.HasPrefix(frame, strings.TrimSuffix(p, "*")) {
				return true
			}
		} else if frame == p {
			return true
		}
	}
	return false
}

// frameGroups are the groups (bit i: KernelGroups[i]) whose Functions and
// whose Under lists one frame's name matches.
type frameGroups struct{ functions, under uint64 }

func matchGroups(frame string) frameGroups {
	var m frameGroups
	for gi, g := range KernelGroups {
		if matches(frame, g.Functions) {
			m.functions |= 1 << gi
		}
		if matches(frame, g.Under) {
			m.under |= 1 << gi
		}
	}
	return m
}

// GroupShares measures, for each KernelGroup, the samples whose stack
// passes through it — inclusive time, as a flame graph shows it — as a share
// of the samples on netRXCPUs (the CPUs that ran the receive softirq) and of
// all samples. A sample counts once per group however many of its frames
// match.
func GroupShares(samples []ProfileSample, netRXCPUs map[int]bool) (groups []FunctionShare, total, netRXTotal uint64) {
	counts := make([]uint64, len(KernelGroups))
	netCounts := make([]uint64, len(KernelGroups))
	// The same frames recur in most stacks: each distinct name is matched
	// against the groups once (a profile holds thousands of frames and a
	// few hundred names).
	known := map[string]frameGroups{}
	for _, s := range samples {
		total += s.Count
		onNet := netRXCPUs[s.CPU]
		if onNet {
			netRXTotal += s.Count
		}
		var hit, under uint64
		for _, f := range s.Frames {
			m, ok := known[f]
			if !ok {
				m = matchGroups(f)
				known[f] = m
			}
			hit |= m.functions
			under |= m.under
		}
		for gi, g := range KernelGroups {
			bit := uint64(1) << gi
			if hit&bit != 0 && (len(g.Under) == 0 || under&bit != 0) {
				counts[gi] += s.Count
				if onNet {
					netCounts[gi] += s.Count
				}
			}
		}
	}
	for gi, g := range KernelGroups {
		fs := FunctionShare{Group: g.Name, Functions: g.Functions, Samples: counts[gi], NetRXSamples: netCounts[gi]}
		if netRXTotal > 0 {
			fs.Share = float64(netCounts[gi]) / float64(netRXTotal)
			fs.ShareLow, fs.ShareHigh = WilsonInterval(netCounts[gi], netRXTotal)
		}
		if total > 0 {
			fs.AllShare = float64(counts[gi]) / float64(total)
		}
		groups = append(groups, fs)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].AllShare > groups[j].AllShare })
	return groups, total, netRXTotal
}
