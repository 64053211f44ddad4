package irq

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Irqbalance is whether the irqbalance daemon runs and how it is told to
// treat drivers' affinity hints. Makita's talk needed "-h exact" so that
// irqbalance spread ixgbe's queues the way affinity_hint asks.
type Irqbalance struct {
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
	// Args are the running daemon's arguments (from /proc/PID/cmdline).
	Args []string `json:"args,omitempty"`
	// ConfigFile is the first of /etc/default/irqbalance (Debian) and
	// /etc/sysconfig/irqbalance (RHEL) that exists; ConfigArgs are its
	// IRQBALANCE_ARGS/OPTIONS words.
	ConfigFile string   `json:"config_file,omitempty"`
	ConfigArgs []string `json:"config_args,omitempty"`
	// HintPolicy is the --hintpolicy/-h value in effect ("exact", "subset",
	// "ignore"); empty when not given (irqbalance's default, which ignores
	// hints on versions ≥ 1.0.8 that dropped the option).
	HintPolicy string `json:"hint_policy,omitempty"`
	// BannedCPUs is IRQBALANCE_BANNED_CPUS / IRQBALANCE_BANNED_CPULIST from
	// the config file, as written.
	BannedCPUs string `json:"banned_cpus,omitempty"`
}

// maxProcScan bounds the process scan: irqbalance is a system daemon with a
// low pid, and hosts with many containers run tens of thousands of
// processes.
const maxProcScan = 8192

// Irqbalance looks for a running irqbalance and reads its configuration.
func (fs FS) Irqbalance() (Irqbalance, error) {
	var ib Irqbalance
	entries, err := os.ReadDir(fs.Path("/proc"))
	if err != nil {
		return ib, err
	}
	scanned := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if scanned++; scanned > maxProcScan {
			break
		}
		comm, err := fs.ReadString(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(comm) != "irqbalance" {
			continue
		}
		ib.Running, ib.PID = true, pid
		if raw, err := fs.ReadString(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			args := strings.Split(strings.TrimRight(raw, "\x00"), "\x00")
			if len(args) > 1 {
				ib.Args = args[1:]
			}
		}
		break
	}
	for _, path := range []string{"/etc/default/irqbalance", "/etc/sysconfig/irqbalance"} {
		f, err := fs.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return ib, err
		}
		ib.ConfigFile = path
		ib.ConfigArgs, ib.BannedCPUs, err = parseIrqbalanceConfig(f)
		f.Close()
		if err != nil {
			return ib, fmt.Errorf("%s: %w", path, err)
		}
		break
	}
	// The running daemon's arguments win over the file, which may have been
	// edited without a restart.
	ib.HintPolicy = hintPolicy(ib.ConfigArgs)
	if p := hintPolicy(ib.Args); p != "" || ib.Running {
		ib.HintPolicy = p
	}
	return ib, nil
}

// parseIrqbalanceConfig reads the shell-variable file the init scripts
// source.
func parseIrqbalanceConfig(f *os.File) (args []string, banned string, err error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		switch key {
		case "IRQBALANCE_ARGS", "OPTIONS", "IRQBALANCE_OPTS":
			args = append(args, strings.Fields(value)...)
		case "IRQBALANCE_BANNED_CPUS", "IRQBALANCE_BANNED_CPULIST":
			banned = value
		}
	}
	return args, banned, sc.Err()
}

// hintPolicy finds -h VALUE, -hVALUE, --hintpolicy VALUE or
// --hintpolicy=VALUE.
func hintPolicy(args []string) string {
	for i, a := range args {
		switch {
		case a == "-h" || a == "--hintpolicy":
			if i+1 < len(args) {
				return args[i+1]
			}
		case strings.HasPrefix(a, "--hintpolicy="):
			return strings.TrimPrefix(a, "--hintpolicy=")
		case strings.HasPrefix(a, "-h") && !strings.HasPrefix(a, "--"):
			return strings.TrimPrefix(a, "-h")
		}
	}
	return ""
}
