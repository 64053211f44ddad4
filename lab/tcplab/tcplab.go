// Package tcplab is `perfscope lab tcp`: for each TCP fault this machine
// can reproduce, it builds the network lab (lab/netlab), plants the fault
// inside the lab's namespaces, drives a TCP server and its clients (this
// process's goroutines, their sockets created inside the namespaces), runs
// `perfscope tcp` in the receiver's namespace with `--apply` of the
// finding it must report, runs again after the fix and prints the
// before/after table.
//
// perfscope itself runs as a child process inside the receiver namespace
// (`ip netns exec`), as a user would run it, so the lab proves the product:
// the finding, its typed change and the revert file are the real ones.
// Each scenario's namespaces are deleted when it ends, on error and on
// Ctrl-C alike, and every server and client goroutine is stopped.
package tcplab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report"
)

// Options configure a lab run.
type Options struct {
	// Binary is the perfscope executable run in the receiver namespace.
	Binary string
	// Duration is each `perfscope tcp` measurement window.
	Duration time.Duration
	// Dir receives the JSON reports and the revert files; it must be
	// private (perfscope refuses a revert directory others can write).
	Dir string
	// Keep leaves each scenario's namespaces in place (load stopped).
	Keep bool
	// Log receives one line per step.
	Log io.Writer
}

// run is the part of a saved `perfscope tcp -o json` report the lab reads.
type run struct {
	Command  string               `json:"command"`
	Data     evidence.NetEvidence `json:"data"`
	Findings []diagnose.Finding   `json:"findings"`
}

// phase is one measured phase: perfscope's report and the lab's counts
// (and its delay line's, when it has one) over the time perfscope ran.
type phase struct {
	run     run
	counts  Counts
	delay   *netlab.DelayStats
	elapsed time.Duration
	stderr  string
}

// Run runs one scenario. An error means the lab itself failed (a tool
// missing, a namespace not created, the context ended); a finding that did
// not appear or did not go away is a Result with Problem set.
func Run(ctx context.Context, o Options, sc Scenario) (res report.LabTCPScenario, err error) {
	started := time.Now()
	res = report.LabTCPScenario{Name: sc.Name, Fault: sc.Fault, Finding: sc.Finding, Fix: sc.FixText, Applied: []string{}, Rows: []report.LabTCPRow{}}
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
	if sc.Lab.NoGRO {
		// veth's GRO default has changed between kernels: say it.
		sc.Setup = append([][]string{{"ethtool", "-K", lab.ReceiverIf, "gro", "off"}}, sc.Setup...)
	}
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
	var line *netlab.DelayLine
	if sc.Delay.Delay > 0 {
		if line, err = lab.StartDelayLine(ctx, sc.Delay); err != nil {
			return res, fmt.Errorf("%s: %w", sc.Name, err)
		}
		// Closed before the namespaces go (defers run last first).
		defer line.Close()
	}
	o.logf("%s: %s; measuring for %v", sc.Name, sc.Fault, o.Duration)
	before, err := o.phase(ctx, lab, line, sc, filepath.Join(o.Dir, sc.Name+"-before.json"),
		[]string{"--apply", sc.Finding, "--revert-dir", o.Dir})
	if err != nil {
		return res, err
	}
	res.Found = findingOf(before.run, sc.Finding)
	if res.Found == nil {
		res.Problem = fmt.Sprintf("perfscope did not report %s for the planted fault", sc.Finding)
		o.logf("%s: %s", sc.Name, res.Problem)
		return res, nil
	}
	o.logf("%s: found %s (%s): %s", sc.Name, sc.Finding, res.Found.Severity, res.Found.Title)
	res.Applied = netlab.AppliedCommands(before.stderr)
	if len(res.Applied) == 0 {
		res.Problem = fmt.Sprintf("perfscope tcp --apply %s applied nothing: %s", sc.Finding, strings.TrimSpace(before.stderr))
		return res, nil
	}
	res.Applied = append(res.Applied, "server and clients restarted: listeners and connections created again")
	for _, a := range res.Applied {
		o.logf("%s: applied %s", sc.Name, a)
	}
	after, err := o.phase(ctx, lab, line, sc, filepath.Join(o.Dir, sc.Name+"-after.json"), nil)
	if err != nil {
		return res, err
	}
	still := findingOf(after.run, sc.Finding)
	res.Gone = still == nil
	res.Rows = rows(sc.Rows, before, after)
	if still != nil {
		// The numbers that kept it, as the finding says them.
		res.Problem = strings.Join(append([]string{fmt.Sprintf("%s is still reported after the fix", sc.Finding)}, still.Evidence...), "; ")
	}
	o.logf("%s: after the fix %s is %s", sc.Name, sc.Finding, map[bool]string{true: "gone", false: "still there"}[res.Gone])
	return res, nil
}

// phase starts the scenario's server and clients, measures with
// `perfscope tcp` in the receiver namespace (extra: --apply), and stops
// the load. line is the scenario's delay line, or nil.
func (o Options) phase(ctx context.Context, lab *netlab.Lab, line *netlab.DelayLine, sc Scenario, reportPath string, extra []string) (phase, error) {
	server := netip.AddrPortFrom(lab.ReceiverAddr, Port)
	load, err := startLoad(ctx, lab.ReceiverNS, lab.SenderNS, server, sc.Server, sc.Workload)
	if err != nil {
		return phase{}, fmt.Errorf("%s: start the lab's server: %w", sc.Name, err)
	}
	defer load.Stop()
	// Let the load reach its steady state before measuring.
	select {
	case <-ctx.Done():
		return phase{}, ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}
	// --exact: the lab compares runs of a few seconds in namespaces of its
	// own; sampling windows would add their error for no production to
	// protect. --no-profile: the table reads no profile.
	args := append([]string{o.Binary, "tcp", "--iface", lab.ReceiverIf, "--port", fmt.Sprint(Port),
		"--duration", o.Duration.String(), "--exact", "--no-profile", "-o", "json"}, extra...)
	cmd := lab.Command(ctx, lab.ReceiverNS, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	c0, t0 := load.Counts(), time.Now()
	var d0 netlab.DelayStats
	if line != nil {
		d0 = line.Stats()
	}
	runErr := cmd.Run()
	p := phase{counts: load.Counts().sub(c0), elapsed: time.Since(t0), stderr: stderr.String()}
	if line != nil {
		d := line.Stats().Sub(d0)
		p.delay = &d
	}
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	// Exit 2 with a report: --apply named a finding this run did not
	// produce; the caller sees the finding missing from the report.
	if runErr != nil && !isExit(runErr, 2) && !isExit(runErr, 1) {
		return p, fmt.Errorf("%s: perfscope tcp: %v: %s", sc.Name, runErr, strings.TrimSpace(stderr.String()))
	}
	if err := os.WriteFile(reportPath, out.Bytes(), 0o644); err != nil {
		return p, err
	}
	if err := json.Unmarshal(out.Bytes(), &p.run); err != nil || p.run.Command != "tcp" || p.run.Data.TCP == nil {
		return p, fmt.Errorf("%s: perfscope tcp printed no TCP report (%v): %s", sc.Name, err, strings.TrimSpace(stderr.String()))
	}
	return p, nil
}

func isExit(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

func findingOf(r run, id string) *diagnose.Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}
