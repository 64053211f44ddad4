// Package cli builds perfscope's commands. Each command lives in its own
// file with an Options struct (flags), and complete → validate → run steps;
// run is a field so tests can check flag parsing without touching the
// kernel.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/perfscope/perfscope/base/gosafe"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/report"
)

// version is set at build time with -ldflags "-X ...cli.version=v1.2.3".
var version = ""

// Version is the build's version: the ldflags value, else the module
// version, else the VCS revision, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

// Globals is what every command shares: where to write and when the process
// started (the overhead report measures time-to-attach from it).
type Globals struct {
	Out     io.Writer
	Err     io.Writer
	Started time.Time
	// ran is set once a command's RunE starts: errors before that are
	// cobra's usage errors.
	ran bool
	// late are, under Execute, the recipe flags not registered yet, by
	// command (lateFlags); nil registers them at once.
	late map[*cobra.Command]func()
}

// NewRoot builds the command tree.
func NewRoot(g *Globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "perfscope",
		Short: "Find where a busy Linux service spends CPU and waits, and what fixes it",
		Long: `perfscope measures where packets and requests spend CPU and wait — with eBPF
probes, the system's configuration and, for JVMs, async-profiler and GC data —
and prints ranked findings with the numbers behind each and the commands to
apply and revert the fix.

Exit codes: 0 ok, 1 findings at or above --fail-on, 2 bad usage or input,
3 missing privilege or kernel feature, 4 the run failed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			g.ran = true
		},
	}
	root.SetOut(g.Out)
	root.SetErr(g.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return asUsage(err) })
	root.AddCommand(
		newVersionCmd(g),
		newSoftirqCmd(g),
		newDoctorCmd(g),
		newProfileCmd(g),
		newOffCPUCmd(g),
		newLoadCmd(g),
		newJVMCmd(g),
		newGoCmd(g),
		newLabCmd(g),
		newFlameCmd(g),
		newGCLogCmd(g),
		newUDPCmd(g),
		newTCPCmd(g),
		newRecipeCmd(g),
		newServeCmd(g),
	)
	return root
}

// Execute runs perfscope with args and returns the exit code. A panic in
// any command becomes one sentence and ExitFailure.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &Globals{Out: stdout, Err: stderr, Started: processStart(), late: map[*cobra.Command]func(){}}
	return execute1(ctx, g, NewRoot(g), args)
}

// execute1 runs root (built by NewRoot) with args; tests pass their own.
func execute1(ctx context.Context, g *Globals, root *cobra.Command, args []string) (code int) {
	stderr := g.Err
	defer recoverPanic(stderr, &code)
	g.registerLate(root, args)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code = CodeOf(err)
	if !g.ran && code == ExitFailure {
		// Unknown command or flag: cobra failed before any command ran.
		code = ExitUsage
	}
	var ee *ExitError
	switch {
	case err == context.Canceled:
		fmt.Fprintln(stderr, "perfscope: interrupted")
	case errors.Is(err, probes.ErrPermission) && !errors.As(err, &ee) && os.Getenv("PERFSCOPE_DEBUG") != "1":
		// The library's own words (map create, MEMLOCK, rlimit) blame the
		// wrong thing and run to hundreds of characters: one sentence, as
		// doctor and profile say it. PERFSCOPE_DEBUG=1 shows the chain.
		fmt.Fprintln(stderr, "perfscope: the kernel refused to load the BPF probes: run as root, or with CAP_BPF and CAP_PERFMON (`perfscope doctor` lists what is missing)")
		return code
	default:
		// Error messages quote names from the system (interfaces,
		// processes, files): escape control characters in them.
		fmt.Fprintf(stderr, "perfscope: %s\n", report.Clean(err.Error()))
	}
	var panicked *gosafe.Panic
	if errors.As(err, &panicked) && os.Getenv("PERFSCOPE_DEBUG") == "1" {
		stderr.Write(panicked.Stack)
	}
	if h := Hint(err); h != "" {
		fmt.Fprintf(stderr, "hint: %s\n", h)
	}
	if code == ExitUsage && !g.ran {
		fmt.Fprintln(stderr, "Run 'perfscope --help' for usage.")
	}
	return code
}

// textOut is standard output for text reports: control characters in
// names from the system are escaped (report.TerminalSafe).
func (g *Globals) textOut() io.Writer { return report.TerminalSafe(g.Out) }

// processStart is when this process began, from /proc/self/stat, so that
// "time to attach" includes Go runtime start-up; falls back to now.
func processStart() time.Time {
	if t, ok := procStartTime(os.Getpid()); ok {
		return t
	}
	return time.Now()
}
