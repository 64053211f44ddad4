package udplab

import (
	"context"
	"os/exec"
	"slices"

	"github.com/perfscope/perfscope/lab/netlab"
)

// MissingTools are the commands the scenarios run that are not on PATH
// (nft and iptables-legacy only for the netfilter scenarios), and the
// Debian packages that have them, each sorted.
func MissingTools(scenarios []Scenario) (tools, packages []string) {
	need := map[string]string{"ip": "iproute2", "ethtool": "ethtool", "taskset": "util-linux", "sysctl": "procps"}
	for _, s := range scenarios {
		for _, c := range s.Setup {
			switch c[0] {
			case "nft":
				need["nft"] = "nftables"
			case "iptables-legacy":
				need["iptables-legacy"] = "iptables"
			}
		}
	}
	for tool, pkg := range need {
		if _, err := exec.LookPath(tool); err != nil {
			tools = append(tools, tool)
			packages = append(packages, pkg)
		}
	}
	slices.Sort(tools)
	slices.Sort(packages)
	return tools, slices.Compact(packages)
}

// Interrupted says where a lab run stopped when it was interrupted.
type Interrupted = netlab.Interrupted

// RunAll runs the scenarios in order, calling done with each result. An
// interrupt (ctx ending during a scenario) stops it: the results so far
// come back with where it stopped; any other error ends the run.
func RunAll(ctx context.Context, o Options, scenarios []Scenario, done func(Result)) ([]Result, *Interrupted, error) {
	var results []Result
	for i, sc := range scenarios {
		res, err := Run(ctx, o, sc)
		if err != nil {
			if ctx.Err() != nil {
				stop := &Interrupted{During: sc.Name}
				for _, s := range scenarios[i:] {
					stop.NotRun = append(stop.NotRun, s.Name)
				}
				return results, stop, nil
			}
			return results, nil, err
		}
		results = append(results, res)
		done(res)
	}
	return results, nil, nil
}
