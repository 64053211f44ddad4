// Package udplab is `perfscope lab udp`: for each fault of Makita's talk that one
// machine can reproduce, it builds the network lab (lab/netlab), plants
// the fault, runs `perfscope udp` in the receiver's namespace, applies the
// fix perfscope recommends, runs again and compares the two runs.
//
// Everything runs as child processes of the perfscope binary inside the
// lab's namespaces (`ip netns exec`), exactly as a user would run them, so
// the lab proves the product and not a test double: the finding, its apply
// changes and the revert file are the real ones. Each scenario's
// namespaces are deleted when it ends, on error and on Ctrl-C alike.
package udplab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report/compare"
)

// Options configure a lab run.
type Options struct {
	// Binary is the perfscope executable the lab runs in the namespaces.
	Binary string
	// Duration is each `perfscope udp` measurement window.
	Duration time.Duration
	// Freq is the profile's sampling rate: higher than udp's default so
	// that a function group of half a percent is a dozen samples.
	Freq int
	// Dir receives each run's JSON report and the revert files; it must
	// be private (perfscope refuses a revert directory others can write).
	Dir string
	// Keep leaves each scenario's namespaces in place (servers stopped).
	Keep bool
	// Log receives one line per step.
	Log io.Writer
}

// Result is one scenario's outcome, ServerCount what the lab's server
// counted: the data of `perfscope lab udp`'s report, rendered by
// report/compare.
type (
	Result      = compare.LabUDPResult
	ServerCount = compare.LabUDPServerCount
)

// Run runs one scenario. An error means the lab itself failed (a tool
// missing, a namespace not created); a scenario whose finding did not
// appear or did not go away returns a Result with Problem set.
func Run(ctx context.Context, o Options, sc Scenario) (res Result, err error) {
	started := time.Now()
	res = Result{Scenario: sc.Describe(), Applied: []string{}, WarnOrWorse: []string{}}
	if sc.Fix == FixApply || sc.Fix == FixNone || sc.Fix == FixNewNamespace || sc.Fix == FixCheck {
		sc.After = sc.Before
	}
	defer unloadNewModules(sc.Modules, loadedModules())
	lab, err := netlab.New(ctx, sc.Lab)
	if err != nil {
		return res, err
	}
	res.Namespaces = []string{lab.SenderNS, lab.ReceiverNS}
	defer func() {
		if cerr := lab.End(o.Keep); cerr != nil && err == nil {
			err = cerr
		}
		res.DurationNs = int64(time.Since(started))
	}()
	for _, c := range sc.Setup {
		if _, err := lab.Run(ctx, lab.ReceiverNS, c...); err != nil {
			return res, fmt.Errorf("%s: plant the fault: %w", sc.Name, err)
		}
	}
	for _, c := range sc.SenderSetup {
		if _, err := lab.Run(ctx, lab.SenderNS, c...); err != nil {
			return res, fmt.Errorf("%s: set up the sender: %w", sc.Name, err)
		}
	}

	// afterLab is where the after run measures: the same lab, or for
	// FixNewNamespace a fresh one (each closed by its own defer).
	afterLab := lab
	var apply []string
	if sc.Fix == FixApply {
		apply = []string{"--apply", sc.Finding, "--revert-dir", o.Dir}
	}
	o.logf("%s: %s; measuring for %v", sc.Name, sc.Fault, o.Duration)
	res.BeforeReport = filepath.Join(o.Dir, sc.Name+"-before.json")
	before, applyOut, count, err := o.phase(ctx, lab, sc, sc.Before, res.BeforeReport, apply)
	res.ServerBefore = count
	if err != nil {
		return res, err
	}
	if f := findingOf(before, sc.Finding); f != nil {
		res.Found = f
	}
	switch {
	case sc.Fix == FixCheck:
		res.Checked, res.Problem = sc.Check(before)
		for _, l := range res.Checked {
			o.logf("%s: %s", sc.Name, l)
		}
		return res, nil
	case sc.Fix == FixNone:
		res.WarnOrWorse = warnOrWorse(before)
		if len(res.WarnOrWorse) > 0 {
			res.Problem = "the tuned rig has findings of severity warn or worse: " + strings.Join(res.WarnOrWorse, ", ")
		}
		o.logf("%s: %d findings of severity warn or worse", sc.Name, len(res.WarnOrWorse))
		return res, nil
	case res.Found == nil:
		res.Problem = fmt.Sprintf("perfscope did not report %s for the planted fault", sc.Finding)
		o.logf("%s: %s", sc.Name, res.Problem)
		return res, nil
	}
	o.logf("%s: found %s (%s): %s", sc.Name, sc.Finding, res.Found.Severity, res.Found.Title)

	switch sc.Fix {
	case FixApply:
		res.Applied = netlab.AppliedCommands(applyOut)
		if len(res.Applied) == 0 {
			res.Problem = fmt.Sprintf("perfscope udp --apply %s applied nothing: %s", sc.Finding, strings.TrimSpace(applyOut))
			return res, nil
		}
	case FixServer:
		if sc.After.RcvBufFromFinding {
			size := res.Found.Recommendation.Parameters["so_rcvbuf_bytes"]
			if size <= 0 {
				res.Problem = fmt.Sprintf("%s names no so_rcvbuf_bytes to apply", sc.Finding)
				return res, nil
			}
			sc.After.RcvBuf, sc.After.RcvBufFromFinding = int(size), false
		}
		res.Applied = []string{fmt.Sprintf("server restarted: %s → %s", sc.Before, sc.After)}
	case FixNewNamespace:
		fresh, err := netlab.New(ctx, sc.Lab)
		if err != nil {
			return res, err
		}
		res.Namespaces = append(res.Namespaces, fresh.SenderNS, fresh.ReceiverNS)
		defer func() {
			if cerr := fresh.End(o.Keep); cerr != nil && err == nil {
				err = cerr
			}
		}()
		afterLab = fresh
		res.Applied = []string{fmt.Sprintf("fresh namespaces %s and %s, without the planted setup", fresh.SenderNS, fresh.ReceiverNS)}
	}
	for _, a := range res.Applied {
		o.logf("%s: applied %s", sc.Name, a)
	}

	res.AfterReport = filepath.Join(o.Dir, sc.Name+"-after.json")
	after, _, count, err := o.phase(ctx, afterLab, sc, sc.After, res.AfterReport, nil)
	res.ServerAfter = count
	if err != nil {
		return res, err
	}
	still := findingOf(after, sc.Finding)
	res.Gone = still == nil
	res.WarnOrWorse = warnOrWorse(after)
	c := compare.Compare(before, after)
	res.Comparison = &c
	if still != nil {
		// The numbers that kept it, as the finding says them.
		res.Problem = strings.Join(append([]string{fmt.Sprintf("%s is still reported after the fix", sc.Finding)}, still.Evidence...), "; ")
	}
	o.logf("%s: after the fix %s is %s", sc.Name, sc.Finding, map[bool]string{true: "gone", false: "still there"}[res.Gone])
	return res, nil
}

// phase runs the server and the flood, measures with `perfscope udp`, and
// stops both. extra is added to the udp command line (--apply).
func (o Options) phase(ctx context.Context, lab *netlab.Lab, sc Scenario, srv Server, reportPath string, extra []string) (compare.Run, string, *ServerCount, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listen := fmt.Sprintf("%s:%d", lab.ReceiverAddr, Port)
	// The server and the flood outlast the measurement with a margin for
	// probe attach; the context stops them as soon as the phase is over.
	life := o.Duration + 30*time.Second
	srvArgs := []string{o.Binary, "lab", "udp-server", "--listen", listen, "--mode", srv.Mode,
		"--threads", fmt.Sprint(srv.Threads), "--for", life.String()}
	if srv.Pin != "" {
		srvArgs = append(srvArgs, "--pin", srv.Pin)
	}
	if srv.Echo {
		srvArgs = append(srvArgs, "--echo")
	}
	if srv.RcvBuf > 0 {
		srvArgs = append(srvArgs, "--rcvbuf", fmt.Sprint(srv.RcvBuf))
	}
	server := lab.Command(ctx, lab.ReceiverNS, srvArgs...)
	var srvOut, srvErr syncBuffer
	server.Stdout, server.Stderr = &srvOut, &srvErr
	if err := lab.Start(server); err != nil {
		return compare.Run{}, "", nil, fmt.Errorf("%s: start the server: %w", sc.Name, err)
	}
	stopServer := func() *ServerCount {
		server.Cancel()
		server.Wait()
		var printed struct {
			Data ServerCount `json:"data"`
		}
		if json.Unmarshal([]byte(srvOut.String()), &printed) != nil {
			return nil
		}
		return &printed.Data
	}
	if err := waitFor(ctx, &srvErr, "listening", 5*time.Second); err != nil {
		stopServer()
		return compare.Run{}, "", nil, fmt.Errorf("%s: the lab server did not start: %w: %s", sc.Name, err, strings.TrimSpace(srvErr.String()))
	}

	floodArgs := []string{o.Binary, "lab", "udp-flood", "--target", listen,
		"--senders", fmt.Sprint(sc.Flood.Senders), "--duration", life.String(), "--max-packets", "500000000"}
	if sc.Flood.Rate > 0 {
		floodArgs = append(floodArgs, "--rate", fmt.Sprint(sc.Flood.Rate))
	}
	if sc.Flood.CPUs != "" {
		floodArgs = append([]string{"taskset", "-c", sc.Flood.CPUs}, floodArgs...)
	}
	flood := lab.Command(ctx, lab.SenderNS, floodArgs...)
	var floodErr syncBuffer
	flood.Stderr = &floodErr
	if err := lab.Start(flood); err != nil {
		stopServer()
		return compare.Run{}, "", nil, fmt.Errorf("%s: start the flood: %w", sc.Name, err)
	}
	// Let the flood reach its steady state before measuring.
	time.Sleep(500 * time.Millisecond)

	// --exact: the lab compares runs of a few seconds before and after a
	// fix, in namespaces of its own; sampling windows would add their
	// error to every comparison for no production to protect.
	args := append([]string{o.Binary, "udp", "--iface", lab.ReceiverIf, "--port", fmt.Sprint(Port),
		"--pid", fmt.Sprint(server.Process.Pid), "--duration", o.Duration.String(), "--freq", fmt.Sprint(o.Freq), "--exact", "-o", "json"}, extra...)
	cmd := lab.Command(ctx, lab.ReceiverNS, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	runErr := cmd.Run()
	flood.Cancel()
	flood.Wait()
	count := stopServer()
	if ctx.Err() != nil {
		return compare.Run{}, "", count, ctx.Err()
	}
	// Exit 2 with a report: --apply named a finding this run did not
	// produce; the caller sees the finding missing from the report.
	if runErr != nil && !isExit(runErr, 2) {
		return compare.Run{}, "", count, fmt.Errorf("%s: perfscope udp: %v: %s", sc.Name, runErr, strings.TrimSpace(stderr.String()))
	}
	if err := os.WriteFile(reportPath, out.Bytes(), 0o644); err != nil {
		return compare.Run{}, "", count, err
	}
	run, err := compare.Decode(bytes.NewReader(out.Bytes()))
	if err != nil {
		return compare.Run{}, "", count, fmt.Errorf("%s: perfscope udp: %w: %s", sc.Name, err, strings.TrimSpace(stderr.String()))
	}
	return run, stderr.String(), count, nil
}

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

func findingOf(run compare.Run, id string) *diagnose.Finding {
	for i := range run.Findings {
		if run.Findings[i].ID == id {
			return &run.Findings[i]
		}
	}
	return nil
}

func warnOrWorse(run compare.Run) []string {
	ids := []string{}
	for _, f := range run.Findings {
		if f.Severity >= diagnose.Warn {
			ids = append(ids, fmt.Sprintf("%s (%s)", f.ID, f.Severity))
		}
	}
	return ids
}

func waitFor(ctx context.Context, b *syncBuffer, text string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %q after %v", text, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// syncBuffer is a bytes.Buffer a child process writes while the lab reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
