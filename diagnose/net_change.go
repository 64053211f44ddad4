package diagnose

import (
	"strconv"
)

// sysctlSetting is a host-wide sysctl a rule computed before it knows
// whether this namespace shows the key: Old is nil when it cannot be read
// (the kernel registers netdev_budget, udp_mem and the like only in the
// initial network namespace), and then perfscope could not write a revert.
type sysctlSetting struct {
	Key string
	Old *string
	New string
}

// change is the typed change (Old known).
func (s sysctlSetting) change() Change {
	old := ""
	if s.Old != nil {
		old = *s.Old
	}
	return SysctlChange(s.Key, old, s.New)
}

func i64s(v *int64) *string {
	if v == nil {
		return nil
	}
	s := strconv.FormatInt(*v, 10)
	return &s
}

// hostOnlyNote says why a host-wide sysctl cannot be applied from here.
const hostOnlyNote = "this is a host-wide sysctl that the kernel shows only in the initial network namespace: run perfscope (or the command) on the host, not inside a container's or lab's namespace"

// settingOrAdvice makes the settings typed changes when every old value is
// known; otherwise the recommendation is advice that shows the commands
// (rendered as the changes would be) and says why perfscope cannot apply
// them.
func settingOrAdvice(r *Recommendation, settings []sysctlSetting, hostOnly bool) {
	known := len(settings) > 0
	for _, s := range settings {
		known = known && s.Old != nil
	}
	if known {
		r.Kind = KindSetting
		for _, s := range settings {
			r.AddChanges(s.change())
		}
		return
	}
	r.Kind = KindAdvice
	for _, s := range settings {
		c := s.change()
		r.Apply = append(r.Apply, "# on the host: "+c.Command(c.New))
	}
	if hostOnly {
		r.Caveats = append(r.Caveats, hostOnlyNote)
	} else {
		r.Caveats = append(r.Caveats, "the current values could not be read, so perfscope cannot write a revert: read them first (sysctl KEY) and keep them")
	}
}
