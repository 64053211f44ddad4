// Command perfscope finds where a busy Linux service spends CPU and waits.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/perfscope/perfscope/internal/cli"
)

func main() {
	deferFirstGC()
	// PERFSCOPE_CPUPROFILE=file writes a Go CPU profile of the whole
	// process, start-up to exit (system time included: the profiling
	// timer counts the process's CPU time), for finding what a run's
	// fixed cost is made of (docs/development.md).
	if path := os.Getenv("PERFSCOPE_CPUPROFILE"); path != "" {
		if err := startCPUProfile(path); err != nil {
			fmt.Fprintf(os.Stderr, "perfscope: PERFSCOPE_CPUPROFILE: %v\n", err)
		}
	}
	// The first SIGINT/SIGTERM cancels the context (commands stop cleanly
	// and print what they measured); a second exits at once.
	ctx, stop := cli.SignalContext(context.Background(), os.Stderr)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	exit(code)
}

// exit is os.Exit, after writing out the CPU profile when one is taken.
var exit = os.Exit

func startCPUProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	exit = func(code int) {
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	return nil
}
