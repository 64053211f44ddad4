package diagnose

import (
	"fmt"
	"strings"
)

// sysctlChange is one computed sysctl change of a recommendation: the value
// read (nil when this namespace cannot see the key) and the value to set.
// Rules compute their changes in one place so that a later typed-change
// executor can take them as data; apply and revert are rendered from them.
type sysctlChange struct {
	Key string
	Old *string
	New string
}

func (c sysctlChange) apply() string { return "sysctl -w " + shellQuote(c.Key+"="+c.New) }

func (c sysctlChange) revert() string {
	if c.Old == nil {
		return ""
	}
	return "sysctl -w " + shellQuote(c.Key+"="+*c.Old)
}

// shellQuote quotes a word for a POSIX shell when it needs it. Values read
// from the system (interface names, table names) pass through it so that
// nothing read can run as a command.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:@%+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func i64s(v *int64) *string {
	if v == nil {
		return nil
	}
	s := fmt.Sprint(*v)
	return &s
}

// hostOnlyNote says why a host-wide sysctl cannot be applied from here.
const hostOnlyNote = "this is a host-wide sysctl that the kernel shows only in the initial network namespace: run perfscope (or the command) on the host, not inside a container's or lab's namespace"

// settingOrAdvice fills apply and revert from changes when every old value
// is known; otherwise the recommendation is advice that shows the commands
// and says why perfscope cannot apply them.
func settingOrAdvice(r *Recommendation, changes []sysctlChange, hostOnly bool) {
	known := len(changes) > 0
	for _, c := range changes {
		known = known && c.Old != nil
	}
	if known {
		r.Kind = KindSetting
		for _, c := range changes {
			r.Apply = append(r.Apply, c.apply())
		}
		for i := len(changes) - 1; i >= 0; i-- {
			r.Revert = append(r.Revert, changes[i].revert())
		}
		return
	}
	r.Kind = KindAdvice
	for _, c := range changes {
		r.Apply = append(r.Apply, "# on the host: "+c.apply())
	}
	if hostOnly {
		r.Caveats = append(r.Caveats, hostOnlyNote)
	} else {
		r.Caveats = append(r.Caveats, "the current values could not be read, so perfscope cannot write a revert: read them first (sysctl KEY) and keep them")
	}
}
