package jvm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
	"github.com/perfscope/perfscope/offcpu"
)

// kernelCommLen is how much of a thread's name the kernel keeps
// (TASK_COMM_LEN less its NUL): HotSpot names each Java thread's native
// thread after it, cut there, and the off-CPU view reads that name.
const kernelCommLen = 15

// javaWaits are the Java methods a thread waits in, by the kind of wait:
// the innermost Java frame of a wall-clock stack that starts with one of
// them names the wait. async-profiler's collapsed output carries no
// thread state, so the stack is the state.
var javaWaits = []struct{ prefix, wait string }{
	{"java.lang.Thread.sleep", "sleep"},
	{"java.lang.Object.wait", "wait"},
	{"jdk.internal.misc.Unsafe.park", "park"},
	{"sun.misc.Unsafe.park", "park"},
	{"sun.nio.ch.EPoll.wait", "poll"},
	{"sun.nio.ch.Net.poll", "poll"},
	{"sun.nio.ch.Net.accept", "socket"},
	{"sun.nio.ch.SocketDispatcher.read", "socket"},
	{"sun.nio.ch.NioSocketImpl.park", "socket"},
	{"java.net.SocketInputStream.socketRead", "socket"},
}

// nativeWaits are native frames a thread blocks in.
var nativeWaits = []string{"futex", "__lll_lock_wait", "pthread_cond_", "nanosleep", "epoll_wait", "__poll", "accept", "ObjectMonitor::"}

func isJavaFrame(f string) bool {
	return strings.Contains(f, ".") && !strings.ContainsAny(f, " :[(")
}

// waitOf is the kind of wait a stack (root first, dotted) is in, or
// "running": the Java wait method its innermost Java frame is in; else,
// when the frames below that Java frame block in the kernel (a futex),
// "monitor" — HotSpot parks a thread inside Java code that way only to
// enter a contended monitor (synchronized) or to hold it at a VM stop
// (safepoint, GC); else "native" for another blocking native frame.
func waitOf(frames []string) string {
	j := -1
	for i := len(frames) - 1; i >= 0; i-- {
		if isJavaFrame(frames[i]) {
			j = i
			break
		}
	}
	if j >= 0 {
		for _, w := range javaWaits {
			if strings.HasPrefix(frames[j], w.prefix) {
				return w.wait
			}
		}
	}
	for _, f := range frames[j+1:] {
		for _, n := range nativeWaits {
			if strings.Contains(f, n) {
				if j >= 0 && (strings.Contains(f, "futex") || strings.Contains(f, "lll_lock") || strings.Contains(f, "ObjectMonitor::")) {
					return "monitor"
				}
				return "native"
			}
		}
	}
	return "running"
}

// frameOf is what a stack is shown under: its innermost application
// frame, else its innermost Java frame, else its leaf.
func frameOf(frames []string) string {
	for i := len(frames) - 1; i >= 0; i-- {
		if isApplication(frames[i]) {
			return frames[i]
		}
	}
	for i := len(frames) - 1; i >= 0; i-- {
		if isJavaFrame(frames[i]) {
			return frames[i]
		}
	}
	if len(frames) == 0 {
		return "[no frames]"
	}
	return frames[len(frames)-1]
}

// Wall joins async-profiler's wall-clock profile of the JVM pid (collapsed
// with `threads`, weights in nanoseconds) with the off-CPU view of the same
// window, pool by pool. off may be nil (the probe did not run); top bounds
// the frames listed per pool.
func Wall(p *asprof.Profile, off *evidence.OffCPU, pid, top int) *evidence.JVMWall {
	out := &evidence.JVMWall{PID: pid, Pools: []evidence.JVMWallPool{}}
	if p == nil {
		out.Warnings = append(out.Warnings, "async-profiler's wall-clock profile could not be read: only the off-CPU view is shown")
		return out
	}
	type poolAcc struct {
		pool    evidence.JVMWallPool
		threads map[string]bool
		frames  map[[2]string]int64
	}
	pools := map[string]*poolAcc{}
	var unthreaded int64
	for _, s := range p.Stacks {
		v := view(s)
		for i, f := range v.frames {
			v.frames[i] = DisplayFrame(f)
		}
		out.WallNs += s.Weight
		if v.tid == "" {
			unthreaded += s.Weight
			continue
		}
		name := v.thread
		if len(name) > kernelCommLen {
			name = name[:kernelCommLen]
		}
		pool := offcpu.PoolName(name)
		a := pools[pool]
		if a == nil {
			a = &poolAcc{pool: evidence.JVMWallPool{Name: pool, ByWait: map[string]int64{}}, threads: map[string]bool{}, frames: map[[2]string]int64{}}
			pools[pool] = a
		}
		a.threads[v.tid] = true
		a.pool.WallNs += s.Weight
		wait := waitOf(v.frames)
		if wait == "running" {
			a.pool.RunningNs += s.Weight
		} else {
			a.pool.WaitingNs += s.Weight
			a.pool.ByWait[wait] += s.Weight
		}
		a.frames[[2]string{frameOf(v.frames), wait}] += s.Weight
	}
	kernel := map[string]evidence.ThreadPool{}
	if off != nil {
		for _, tp := range off.Pools {
			if tp.PID == pid {
				kernel[tp.Name] = tp
			}
		}
	} else {
		out.Warnings = append(out.Warnings, "the off-CPU probe did not run: the kernel's side of each pool is missing")
	}
	for _, a := range pools {
		a.pool.Threads = len(a.threads)
		for k, ns := range a.frames {
			a.pool.TopFrames = append(a.pool.TopFrames, evidence.JVMWallFrame{Frame: k[0], State: k[1], Ns: ns, Share: share(ns, a.pool.WallNs)})
		}
		sort.Slice(a.pool.TopFrames, func(i, j int) bool {
			x, y := a.pool.TopFrames[i], a.pool.TopFrames[j]
			if x.Ns != y.Ns {
				return x.Ns > y.Ns
			}
			return x.Frame+x.State < y.Frame+y.State
		})
		if top > 0 && len(a.pool.TopFrames) > top {
			a.pool.TopFrames = a.pool.TopFrames[:top]
		}
		if tp, ok := kernel[a.pool.Name]; ok {
			a.pool.OffCPU = &evidence.JVMWallKernel{Threads: tp.Threads, SeenNs: tp.SeenNs, OnCPUNs: tp.OnCPUNs, RunnableNs: tp.RunnableNs,
				BlockedNs: tp.BlockedNs, BlockedShare: tp.BlockedShare, TopSite: tp.TopSite, TopSiteReason: tp.TopSiteReason,
				TopSiteNs: tp.TopSiteNs, TopSiteWaker: tp.TopSiteWaker}
		}
		out.Pools = append(out.Pools, a.pool)
	}
	sort.Slice(out.Pools, func(i, j int) bool {
		x, y := out.Pools[i], out.Pools[j]
		if x.WaitingNs != y.WaitingNs {
			return x.WaitingNs > y.WaitingNs
		}
		return x.Name < y.Name
	})
	if unthreaded > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%.1f ms of wall-clock samples carry no thread: left out of the pools", float64(unthreaded)/1e6))
	}
	return out
}

func share(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}
