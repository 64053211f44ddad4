// Command perfscope finds where a busy Linux service spends CPU and waits.
package main

import (
	"context"
	"os"

	"github.com/perfscope/perfscope/internal/cli"
)

func main() {
	// The first SIGINT/SIGTERM cancels the context (commands stop cleanly
	// and print what they measured); a second exits at once.
	ctx, stop := cli.SignalContext(context.Background(), os.Stderr)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
