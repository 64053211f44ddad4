package cli

import (
	"strconv"

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

// resolve checks the flags and finds the processes the filter names now,
// before anything loads (measure.ResolveWorkload).
func (w *workloadFlags) resolve(src measure.Sources) (err error) {
	w.sel, err = measure.ResolveWorkload(src, w.Cgroup, w.Container, w.Pod)
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

// target sets the pid of a command that measures one process (jvm, go):
// --pid as given, or the one process choose finds among the workload's
// (who names the process a pid must be, for the sentence without either).
func (w *workloadFlags) target(src measure.Sources, rf *recipeFlags, who string, choose func(*cgroup.Selection) (int, error)) error {
	switch pidGiven := rf.fs.Changed("pid"); {
	case !w.given() && !pidGiven:
		return usageError("--pid is required: pass the pid of %s, or its --container or --pod", who)
	case !w.given():
		return nil
	case pidGiven:
		return usageError("--pid and --cgroup, --container or --pod exclude each other: give one")
	}
	if err := w.resolve(src); err != nil {
		return err
	}
	pid, err := choose(w.sel)
	rf.set["pid"] = strconv.Itoa(pid)
	return err
}
