// offcpuprobe attaches perfscope's offcpu probe until its standard input
// closes (or it is interrupted), then prints what it counted and what its
// programs cost: the perfscope side of bench/offcpu.sh until the offcpu
// command exists.
//
//	offcpuprobe [-pid PID] [-min-block 10us] [-stack-every N] [-no-waker-stacks] [-stacks kernel+user|kernel|user]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/perfscope/perfscope/probes"
	probe "github.com/perfscope/perfscope/probes/offcpu"
)

func main() {
	var o probe.Options
	stacks := flag.String("stacks", "kernel+user", "kernel+user, kernel or user")
	flag.IntVar(&o.PID, "pid", 0, "watch one process (0: all)")
	flag.DurationVar(&o.MinBlock, "min-block", 0, "shortest wait kept by stack (0: the default)")
	flag.IntVar(&o.StackEvery, "stack-every", 1, "take stacks at 1 in N switches")
	flag.BoolVar(&o.NoWakerStacks, "no-waker-stacks", false, "keep who woke a wait, not the waker's stacks")
	empty := flag.Bool("empty", false, "attach empty programs to the probe's tracepoints instead: the floor any tool pays")
	flag.Parse()
	if *empty {
		var names []string
		for _, h := range probe.Hooks {
			names = append(names, h.Name)
		}
		e, err := probes.AttachEmpty(names)
		if err != nil {
			fmt.Fprintln(os.Stderr, "offcpuprobe:", err)
			os.Exit(3)
		}
		defer e.Close()
		fmt.Println("attached empty")
		wait()
		return
	}
	switch *stacks {
	case "kernel":
		o.Stacks = probe.KernelOnly
	case "user":
		o.Stacks = probe.UserOnly
	}
	p, err := probe.Open(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "offcpuprobe:", err)
		os.Exit(3)
	}
	defer p.Close()
	fmt.Println("attached", p.Method())
	start := time.Now()
	wait()
	s, err := p.Snapshot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "offcpuprobe:", err)
		os.Exit(1)
	}
	costs, _ := p.SelfCosts()
	var hooks []string
	for h := range costs {
		hooks = append(hooks, h)
	}
	sort.Strings(hooks)
	var runs, ns uint64
	for _, h := range hooks {
		t := probes.Total(costs[h])
		fmt.Printf("%-24s runs %10d  %6.0f ns/run (self-timed)\n", h, t.Runs, float64(t.PerRun()))
		runs += t.Runs
		ns += t.Runs * uint64(t.PerRun())
	}
	el := time.Since(start)
	fmt.Printf("threads %d, waits kept %d, lost %d; programs %.2f %% of one CPU over %v\n", len(s.Threads), len(s.Waits), s.Lost.Total(),
		100*float64(ns)/float64(el), el.Round(time.Millisecond))
}

// wait returns when standard input closes or a signal comes.
func wait() {
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
}
