package udplab

import (
	"os"
	"os/exec"
	"strings"
)

// loadedModules lists /proc/modules by name with their use counts (nil
// when the kernel has no loadable modules).
func loadedModules() map[string]string {
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			out[f[0]] = f[2]
		}
	}
	return out
}

// unloadNewModules removes, in order, the named modules that a scenario's
// setup loaded — absent before, loaded now — and that nothing uses. A
// module that was loaded before the lab is never touched; one still in
// use stays (another user may have come).
func unloadNewModules(names []string, before map[string]string) {
	if before == nil || len(names) == 0 {
		return
	}
	for _, m := range names {
		if _, was := before[m]; was {
			continue
		}
		if refs, now := loadedModules()[m]; now && refs == "0" {
			exec.Command("modprobe", "-r", m).Run()
		}
	}
}
