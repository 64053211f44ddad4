package cli

import (
	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/collectors/cgroup"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
)

// workloadFlags are --cgroup, --container and --pod: the measuring
// commands keep what the processes of one cgroup, container or pod own.
type workloadFlags struct {
	Cgroup, Container, Pod string
	// sel is what resolve found.
	sel *cgroup.Selection
}

func (w *workloadFlags) register(f *pflag.FlagSet) {
	f.StringVar(&w.Cgroup, "cgroup", "", "only the processes in this cgroup or below it (a path such as /kubepods.slice/… or a directory under /sys/fs/cgroup)")
	f.StringVar(&w.Container, "container", "", "only the processes of this container: its id, a unique prefix of it (containerd://ID as kubectl prints it works), or its name")
	f.StringVar(&w.Pod, "pod", "", "only the processes of this Kubernetes pod: NAMESPACE/NAME or the pod's uid")
}

// filter is the one filter given (nil: none); two given, or one that can
// name nothing, is a usage error.
func (w *workloadFlags) filter() (*cgroup.Filter, error) {
	var given []func() (cgroup.Filter, error)
	if w.Cgroup != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.CgroupFilter(w.Cgroup) })
	}
	if w.Container != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.ContainerFilter(w.Container) })
	}
	if w.Pod != "" {
		given = append(given, func() (cgroup.Filter, error) { return cgroup.PodFilter(w.Pod) })
	}
	switch len(given) {
	case 0:
		return nil, nil
	case 1:
		f, err := given[0]()
		if err != nil {
			return nil, asUsage(err)
		}
		return &f, nil
	}
	return nil, usageError("--cgroup, --container and --pod exclude each other: give one")
}

// resolve checks the flags and finds the processes the filter names now,
// before anything loads: nothing matching is exit 2 with one sentence
// saying what was seen instead.
func (w *workloadFlags) resolve(src measure.Sources) error {
	f, err := w.filter()
	if err != nil || f == nil {
		return err
	}
	w.sel, err = measure.SelectWorkload(src, *f)
	return err
}

// given is true when one of the flags was given.
func (w *workloadFlags) given() bool { return w.Cgroup != "" || w.Container != "" || w.Pod != "" }

// apply keeps plan to the resolved selection.
func (w *workloadFlags) apply(plan *recipes.Plan) {
	if w.sel != nil {
		plan.SetWorkload(w.sel)
	}
}
