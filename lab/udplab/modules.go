package udplab

import (
	"os/exec"

	"github.com/perfscope/perfscope/collectors/procfs"
)

// loadedModules lists the loaded modules with their use counts (nil when
// they cannot be read: then the lab unloads nothing).
func loadedModules() procfs.Modules {
	m, err := procfs.Default.Modules()
	if err != nil {
		return nil
	}
	return m
}

// unloadNewModules removes, in order, the named modules that a scenario's
// setup loaded — absent before, loaded now — and that nothing uses. A
// module that was loaded before the lab is never touched; one still in
// use stays (another user may have come).
func unloadNewModules(names []string, before procfs.Modules) {
	if before == nil || len(names) == 0 {
		return
	}
	for _, m := range names {
		if _, was := before[m]; was {
			continue
		}
		if refs, now := loadedModules()[m]; now && refs == 0 {
			exec.Command("modprobe", "-r", m).Run()
		}
	}
}
