package report

import (
	"bytes"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// Doctor check statuses.
const (
	StatusOK      = "ok"
	StatusWarn    = "warn"
	StatusMissing = "missing"
)

// DoctorCheck is one line of `perfscope doctor`.
type DoctorCheck struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
	// Affects says what in perfscope depends on this check.
	Affects string `json:"affects"`
	Fix     string `json:"fix,omitempty"`
}

// DoctorData is the data of `perfscope doctor`.
type DoctorData struct {
	Checks []DoctorCheck `json:"checks"`
	// Recipe is the recipe whose needs were checked (--recipe), RunLine
	// the docker/podman run line granting exactly those, Kubernetes the
	// least pod spec (privilege.PodSpec).
	Recipe     string `json:"recipe,omitempty"`
	RunLine    string `json:"run_line,omitempty"`
	Kubernetes any    `json:"kubernetes,omitempty"`
}

func writeDoctorText(w io.Writer, r *Report, d DoctorData) {
	m := r.Meta
	fmt.Fprintf(w, "perfscope doctor — %s, kernel %s, %d CPUs\n", m.Host, m.Kernel, m.CPUs)
	cat := ""
	for _, c := range d.Checks {
		if c.Category != cat {
			cat = c.Category
			Heading(w, cat)
		}
		fmt.Fprintf(w, "%-9s %-28s %s\n", "["+c.Status+"]", c.Name, c.Detail)
		if c.Status != StatusOK {
			if c.Affects != "" {
				fmt.Fprintf(w, "%-9s %-28s affects: %s\n", "", "", c.Affects)
			}
			if c.Fix != "" {
				fmt.Fprintf(w, "%-9s %-28s fix: %s\n", "", "", c.Fix)
			}
		}
	}
	if d.Recipe != "" {
		Heading(w, "run "+d.Recipe+" with exactly what it needs")
		fmt.Fprintln(w, d.RunLine)
		fmt.Fprintf(w, "Kubernetes: perfscope doctor --recipe %s --kubernetes prints the pod spec\n", d.Recipe)
	}
}

// WritePod writes the least pod spec for a recipe (doctor --kubernetes):
// JSON, or YAML under a comment saying what it is.
func WritePod(w io.Writer, pod any, f Format, recipe string, apply bool) error {
	if f == JSON {
		return WriteJSON(w, pod)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(pod); err != nil {
		return err
	}
	flag := ""
	if apply {
		flag = " --apply"
	}
	_, err := fmt.Fprintf(w, "# perfscope doctor --recipe %s%s --kubernetes: the least a pod needs to run it\n%s", recipe, flag, b.String())
	return err
}
