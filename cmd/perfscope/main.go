// Command perfscope finds where a busy Linux service spends CPU and waits.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/perfscope/perfscope/internal/cli"
)

func main() {
	// SIGINT/SIGTERM cancel the context: every command stops its probes,
	// closes every BPF link and map, stops any profiler it started and
	// still prints what it measured.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
