package tcplab

import (
	"context"
	"os/exec"
	"slices"

	"github.com/perfscope/perfscope/lab/netlab"
	"github.com/perfscope/perfscope/report"
)

// MissingTools are the commands the lab runs that are not on PATH, and
// the Debian packages that have them, each sorted.
func MissingTools() (tools, packages []string) {
	need := map[string]string{"ip": "iproute2", "ethtool": "ethtool", "sysctl": "procps"}
	for tool, pkg := range need {
		if _, err := exec.LookPath(tool); err != nil {
			tools = append(tools, tool)
			packages = append(packages, pkg)
		}
	}
	slices.Sort(tools)
	slices.Sort(packages)
	return tools, packages
}

// Interrupted says where a lab run stopped when it was interrupted.
type Interrupted = netlab.Interrupted

// RunAll runs the scenarios in order (listing those with Skip set as
// skipped), calling done with each result. An interrupt (ctx ending during
// a scenario) stops it: the results so far come back with where it
// stopped; any other error ends the run.
func RunAll(ctx context.Context, o Options, scenarios []Scenario, done func(report.LabTCPScenario)) (report.LabTCPData, *Interrupted, error) {
	data := report.LabTCPData{Scenarios: []report.LabTCPScenario{}, Skipped: []report.LabTCPSkipped{}}
	for i, sc := range scenarios {
		if sc.Skip != "" {
			data.Skipped = append(data.Skipped, report.LabTCPSkipped{Name: sc.Name, Fault: sc.Fault, Reason: sc.Skip})
			continue
		}
		res, err := Run(ctx, o, sc)
		if err != nil {
			if ctx.Err() != nil {
				stop := &Interrupted{During: sc.Name}
				for _, s := range scenarios[i:] {
					if s.Skip == "" {
						stop.NotRun = append(stop.NotRun, s.Name)
					}
				}
				return data, stop, nil
			}
			return data, nil, err
		}
		data.Scenarios = append(data.Scenarios, res)
		done(res)
	}
	return data, nil, nil
}
