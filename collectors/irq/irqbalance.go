package irq

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Irqbalance is whether the irqbalance daemon runs, which version is
// installed and how it is configured. Makita's talk (2016) needed "-h exact"
// so that irqbalance spread ixgbe's queues the way affinity_hint asks; that
// option exists only up to irqbalance 1.1 (the 1.1.0 man page lists
// -h/--hintpolicy, 1.3.0's does not; upstream issues Irqbalance/irqbalance
// #68 and #311 record its removal), so advice depends on Version.
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
	// HintPolicy is the --hintpolicy/-h value given ("exact", "subset",
	// "ignore"); empty when not given. Only irqbalance ≤ 1.1 reads it.
	HintPolicy string `json:"hint_policy,omitempty"`
	// Version is the installed irqbalance's upstream version ("1.9.3"),
	// from the package database (dpkg) or `irqbalance --version`; empty
	// when unknown. VersionSource says which.
	Version       string `json:"version,omitempty"`
	VersionSource string `json:"version_source,omitempty"`
	// BannedCPUs is IRQBALANCE_BANNED_CPUS / IRQBALANCE_BANNED_CPULIST from
	// the config file, as written.
	BannedCPUs string `json:"banned_cpus,omitempty"`
}

// Irqbalance looks for a running irqbalance and reads its configuration.
func (fs FS) Irqbalance() (Irqbalance, error) {
	running, err := fs.FS.Running("irqbalance")
	if err != nil {
		return Irqbalance{}, err
	}
	return fs.IrqbalanceOf(running["irqbalance"])
}

// IrqbalanceOf reads irqbalance's configuration, and the arguments of the
// running daemon pid (0: none runs) a scan of the processes found
// (procfs.FS.Running), for a caller that scanned for other daemons too.
func (fs FS) IrqbalanceOf(pid int) (Irqbalance, error) {
	var ib Irqbalance
	if pid > 0 {
		ib.Running, ib.PID = true, pid
		if raw, err := fs.ReadString(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
			args := strings.Split(strings.TrimRight(raw, "\x00"), "\x00")
			if len(args) > 1 {
				ib.Args = args[1:]
			}
		}
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
	if f, err := fs.Open("/var/lib/dpkg/status"); err == nil {
		ib.Version = dpkgVersion(f, "irqbalance")
		f.Close()
		if ib.Version != "" {
			ib.VersionSource = "dpkg"
		}
	}
	if ib.Version == "" && fs.Root == "/" && (ib.Running || havePath("irqbalance")) {
		if v := versionFromBinary(); v != "" {
			ib.Version, ib.VersionSource = v, "irqbalance --version"
		}
	}
	return ib, nil
}

// dpkgVersion returns the upstream version of an installed package from
// dpkg's status file ("Version: 1.9.3-2" → "1.9.3"; an epoch goes too).
// The file lists every package installed (700 KB on a desktop): the
// package's own stanzas are found with a byte search and only they are
// parsed.
func dpkgVersion(r io.Reader, pkg string) string {
	data, err := io.ReadAll(r)
	if err != nil {
		return ""
	}
	needle := []byte("Package: " + pkg + "\n")
	for off := 0; off < len(data); {
		i := bytes.Index(data[off:], needle)
		if i < 0 {
			return ""
		}
		start := off + i
		off = start + len(needle)
		if start > 0 && data[start-1] != '\n' {
			continue // the words inside another field
		}
		stanza := data[start:]
		if end := bytes.Index(stanza, []byte("\n\n")); end >= 0 {
			stanza = stanza[:end+1]
		}
		if v := stanzaVersion(bytes.NewReader(stanza), pkg); v != "" {
			return v
		}
	}
	return ""
}

// stanzaVersion parses dpkg status stanzas for pkg's installed version.
func stanzaVersion(r io.Reader, pkg string) string {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	in, installed, version := false, false, ""
	flush := func() string {
		if in && installed && version != "" {
			return upstreamVersion(version)
		}
		return ""
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if v := flush(); v != "" {
				return v
			}
			in, installed, version = false, false, ""
		case strings.HasPrefix(line, "Package: "):
			in = strings.TrimPrefix(line, "Package: ") == pkg
		case strings.HasPrefix(line, "Status: "):
			installed = strings.HasSuffix(line, " installed")
		case strings.HasPrefix(line, "Version: "):
			version = strings.TrimPrefix(line, "Version: ")
		}
	}
	return flush()
}

func upstreamVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		v = v[:i]
	}
	return v
}

func havePath(bin string) bool {
	_, err := exec.LookPath(bin)
	return err == nil
}

// versionFromBinary runs `irqbalance --version` (1.x prints "irqbalance
// version 1.9.4"), bounded so a wedged binary cannot stall a run.
func versionFromBinary() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "irqbalance", "--version").CombinedOutput()
	return parseVersionOutput(string(out))
}

func parseVersionOutput(out string) string {
	f := strings.Fields(out)
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return strings.TrimPrefix(f[i+1], "v")
		}
	}
	return ""
}

// VersionAtLeast compares Version with major.minor; ok is false when the
// version is unknown or unparsable.
func (ib Irqbalance) VersionAtLeast(major, minor int) (atLeast, ok bool) {
	parts := strings.SplitN(ib.Version, ".", 3)
	if len(parts) < 2 {
		return false, false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false, false
	}
	return ma > major || ma == major && mi >= minor, true
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
