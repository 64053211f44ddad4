package apply

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/base/shellquote"
	"github.com/perfscope/perfscope/diagnose"
)

// FormatV1 names the revert file format; a reader refuses any other.
const FormatV1 = "perfscope-revert/v1"

// MaxRevertFile bounds what --revert reads.
const MaxRevertFile = 16 << 20

// ErrBadRevertFile wraps every reason a file is not a revert file
// perfscope will act on; the CLI maps it to exit 2.
var ErrBadRevertFile = errors.New("not a revert file perfscope will use")

// FileError says which file was refused and why.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s: %v (%v); nothing was changed", e.Path, ErrBadRevertFile, e.Err)
}

func (e *FileError) Unwrap() []error { return []error{ErrBadRevertFile, e.Err} }

// Identity is where changes were made: a revert applies only there.
type Identity struct {
	Host string `json:"host"`
	// NetNS is the network namespace, as /proc/self/ns/net names it
	// ("net:[4026531840]"): interfaces, sysctls and tables of another
	// namespace are other objects with the same names.
	NetNS string `json:"net_namespace"`
}

// CurrentIdentity is this process's host name and network namespace.
func CurrentIdentity() (Identity, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Identity{}, err
	}
	ns, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		return Identity{}, fmt.Errorf("read the network namespace: %w", err)
	}
	return Identity{Host: sanitizeHost(unix.ByteSliceToString(u.Nodename[:])), NetNS: ns}, nil
}

// sanitizeHost keeps a host name as JSON can carry it (the kernel allows
// any bytes); it is only ever compared and printed quoted.
func sanitizeHost(h string) string {
	if h == "" {
		return "(none)"
	}
	return strings.ToValidUTF8(h, "\uFFFD")
}

// Matches refuses a revert on another host or in another namespace.
func (id Identity) Matches(here Identity) error {
	if id.Host != here.Host {
		return fmt.Errorf("written on host %q, this is %q", id.Host, here.Host)
	}
	if id.NetNS != here.NetNS {
		return fmt.Errorf("written in network namespace %s, this process is in %s: run it where --apply ran (ip netns exec NAME perfscope udp --revert FILE)", id.NetNS, here.NetNS)
	}
	return nil
}

// RunInfo is the run whose findings were applied.
type RunInfo struct {
	Command   string    `json:"command"`
	Version   string    `json:"version"`
	Started   time.Time `json:"started"`
	Interface string    `json:"interface,omitempty"`
	Findings  []string  `json:"findings"`
}

// Entry is one change as --apply made it: Old is the value found right
// before the change (RunOld the run's reading when that differed).
type Entry struct {
	FindingID string          `json:"finding"`
	Change    diagnose.Change `json:"change"`
	RunOld    string          `json:"run_old,omitempty"`
	Saved     *Saved          `json:"saved,omitempty"`
}

// RevertFile is perfscope's record of an --apply.
type RevertFile struct {
	Format  string    `json:"format"`
	Written time.Time `json:"written"`
	Identity
	Run     RunInfo `json:"run"`
	Changes []Entry `json:"changes"`
	// Shell is the revert as shell commands, last change first, for a
	// human to read; perfscope never runs it, and the reader requires it
	// to be exactly what the changes render to.
	Shell []string `json:"shell"`
}

// ShellRendition renders the revert as commands.
func (rf RevertFile) ShellRendition() []string {
	out := []string{fmt.Sprintf("# perfscope udp --revert restores these natively (this rendition is never run); --apply of %s at %s, host %q, network namespace %s",
		strings.Join(rf.Run.Findings, ","), rf.Written.UTC().Format(time.RFC3339), rf.Host, rf.NetNS)}
	for i := len(rf.Changes) - 1; i >= 0; i-- {
		out = append(out, revertCommand(rf.Changes[i]))
	}
	return out
}

func revertCommand(e Entry) string {
	c := e.Change
	switch {
	case c.Kind == diagnose.ChangeNftTable && e.Saved != nil && e.Saved.Nft != nil:
		return NftRestoreCommand(*e.Saved.Nft)
	case c.Kind == diagnose.ChangeIrqbalanceBan && e.Saved != nil && e.Saved.File != nil:
		return "printf '%s' " + shellquote.Quote(e.Saved.File.Contents) + " > " + shellquote.Quote(c.Path) + "   # then: systemctl restart irqbalance"
	case (c.Kind == diagnose.ChangeModule || c.Kind == diagnose.ChangeIptablesTable) && e.Saved != nil && e.Saved.Module != nil:
		return shellquote.Join(append([]string{"modprobe", c.Module}, strings.Fields(e.Saved.Module.Params)...)...)
	}
	return c.Command(c.Old)
}

// --- writing --------------------------------------------------------------------

// WriteRevertFile writes rf as a new file in dir: the directory must be
// owned by this user or root and, when others may write it, sticky
// (safeio.OpenTrustedDir); the file is created exclusively (never through
// a link), mode 0600, synced with its directory before this returns, and
// validated as --revert will read it.
func WriteRevertFile(dir string, rf *RevertFile) (string, error) {
	d, err := safeio.OpenTrustedDir(dir)
	if err != nil {
		return "", fmt.Errorf("revert directory: %w", err)
	}
	defer d.Close()
	rf.Format = FormatV1
	if rf.Written.IsZero() {
		rf.Written = time.Now().UTC().Truncate(time.Second)
	}
	rf.Host = sanitizeHost(rf.Host)
	rf.Shell = rf.ShellRendition()
	if err := rf.Validate(); err != nil {
		return "", fmt.Errorf("revert file: %w", err)
	}
	data, err := json.MarshalIndent(rf, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	name := fmt.Sprintf("perfscope-revert-%s-%s.json", rf.Written.UTC().Format("20060102T150405Z"), hex.EncodeToString(rnd[:]))
	path := filepath.Join(dir, name)
	err = d.CreateFile(name, 0o600, true, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("write revert file %s: %w", path, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path, nil
}

// OpenTrustedDir opens dir as WriteRevertFile and ReadRevertFile do
// (safeio.OpenTrustedDir), for checking --revert-dir before a run.
func OpenTrustedDir(dir string) (*safeio.Dir, error) {
	d, err := safeio.OpenTrustedDir(dir)
	if err != nil {
		return nil, fmt.Errorf("revert directory: %w", err)
	}
	return d, nil
}

// --- reading --------------------------------------------------------------------

// ReadRevertFile opens path as --revert does — in a trusted directory, not
// through a link, a regular file owned by this user or root and writable
// by nobody else, at most MaxRevertFile bytes — and parses and validates
// it completely. Every refusal is a *FileError.
func ReadRevertFile(path string) (RevertFile, error) {
	fail := func(err error) (RevertFile, error) { return RevertFile{}, &FileError{Path: path, Err: err} }
	d, err := OpenTrustedDir(filepath.Dir(path))
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	f, st, err := d.OpenTrustedFile(filepath.Base(path))
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if st.Size > MaxRevertFile {
		return fail(fmt.Errorf("%d bytes, more than a revert file holds", st.Size))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRevertFile+1))
	if err != nil {
		return fail(err)
	}
	rf, err := ParseRevertFile(data)
	if err != nil {
		return fail(err)
	}
	return rf, nil
}

// ParseRevertFile parses and validates a revert file's bytes: unknown
// fields, a key not spelled exactly as the format spells it, a key given
// twice, trailing data, or any field out of its form is an error. An
// empty or cut-off file is what an --apply killed while creating it
// leaves, and says so.
func ParseRevertFile(data []byte) (RevertFile, error) {
	var rf RevertFile
	switch {
	case len(data) > MaxRevertFile:
		return rf, errors.New("too large")
	case len(data) == 0:
		return rf, errors.New("empty: the --apply that created it was killed before it recorded anything, and changes nothing before its revert file is complete; remove it")
	}
	if err := exactKeys(json.NewDecoder(bytes.NewReader(data)), reflect.TypeFor[RevertFile](), "the file"); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return rf, fmt.Errorf("it ends mid-document after %d bytes: an --apply killed while writing it leaves it so, and changes nothing before its revert file is complete", len(data))
		}
		return rf, fmt.Errorf("not perfscope revert JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return RevertFile{}, fmt.Errorf("not perfscope revert JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return RevertFile{}, errors.New("data after the revert document")
	}
	if err := rf.Validate(); err != nil {
		return RevertFile{}, err
	}
	return rf, nil
}

var (
	findingID   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,63}$`)
	netnsName   = regexp.MustCompile(`^net:\[[0-9]{1,20}\]$`)
	versionText = regexp.MustCompile(`^[\x21-\x7e]{0,64}$`)
	releaseName = regexp.MustCompile(`^/lib/modules/([A-Za-z0-9._+-]{1,64})/`)
)

// Validate checks every field of a revert file: what --revert may do is
// exactly what a rule could have asked --apply to do.
func (rf RevertFile) Validate() error {
	switch {
	case rf.Format != FormatV1:
		return fmt.Errorf("format %q, want %q", rf.Format, FormatV1)
	case rf.Written.IsZero() || rf.Written.Year() < 2000 || rf.Written.Year() > 9999:
		return errors.New("no valid time of writing")
	case rf.Host == "" || len(rf.Host) > 256 || !utf8.ValidString(rf.Host):
		return errors.New("no valid host name")
	case !netnsName.MatchString(rf.NetNS):
		return fmt.Errorf("network namespace %q", rf.NetNS)
	case rf.Run.Command != "udp" && rf.Run.Command != "tcp":
		// The commands whose --apply writes revert files.
		return fmt.Errorf("run command %q", rf.Run.Command)
	case !versionText.MatchString(rf.Run.Version):
		return errors.New("run version is not a printable word")
	case rf.Run.Interface != "" && diagnose.ValidIfaceName(rf.Run.Interface) != nil:
		return fmt.Errorf("run interface %q", rf.Run.Interface)
	case len(rf.Run.Findings) == 0 || len(rf.Run.Findings) > 64:
		return errors.New("run names no findings")
	case len(rf.Changes) == 0 || len(rf.Changes) > 4096:
		return fmt.Errorf("%d changes (want 1-4096)", len(rf.Changes))
	}
	for i, id := range rf.Run.Findings {
		if !findingID.MatchString(id) || slices.Contains(rf.Run.Findings[:i], id) {
			return fmt.Errorf("finding id %q", id)
		}
	}
	for i, e := range rf.Changes {
		if err := e.validate(rf.Run); err != nil {
			return fmt.Errorf("change %d: %w", i+1, err)
		}
	}
	if !slices.Equal(rf.Shell, rf.ShellRendition()) {
		return errors.New("its shell rendition does not match its changes")
	}
	return nil
}

// changeShapes are the changes a finding's rule can make; tests of the
// mechanism (every kind, on a fake host or a live one) widen them.
var changeShapes = ruleChangeShapes

// ruleChangeShapes are the shapes of the net.* rules (perfscope udp and
// tcp) and of the tcp.* ones (perfscope tcp).
func ruleChangeShapes(id string) ([]diagnose.ChangeShape, bool) {
	if shapes, ok := diagnose.NetChangeShapes(id); ok {
		return shapes, true
	}
	return diagnose.TCPChangeShapes(id)
}

func (e Entry) validate(run RunInfo) error {
	c := e.Change
	if !slices.Contains(run.Findings, e.FindingID) {
		return fmt.Errorf("finding %q is not one of the run's", e.FindingID)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	shapes, ok := changeShapes(e.FindingID)
	if !ok {
		return fmt.Errorf("finding %q is not one of perfscope's rules", e.FindingID)
	}
	if err := diagnose.Allowed(shapes, c, run.Interface); err != nil {
		return fmt.Errorf("finding %s: %w", e.FindingID, err)
	}
	if e.RunOld != "" {
		alt := c
		alt.Old = e.RunOld
		if err := alt.Validate(); err != nil {
			return fmt.Errorf("run_old: %w", err)
		}
		if err := diagnose.Allowed(shapes, alt, run.Interface); err != nil {
			return fmt.Errorf("run_old: finding %s: %w", e.FindingID, err)
		}
	}
	s := e.Saved
	want := map[diagnose.ChangeKind]string{diagnose.ChangeNftTable: "nft", diagnose.ChangeModule: "module", diagnose.ChangeIptablesTable: "module",
		diagnose.ChangeThreadAffinity: "thread", diagnose.ChangeIrqbalanceBan: "file"}[c.Kind]
	var have []string
	if s != nil {
		for _, p := range []struct {
			name string
			set  bool
		}{{"nft", s.Nft != nil}, {"module", s.Module != nil}, {"thread", s.Thread != nil}, {"file", s.File != nil}} {
			if p.set {
				have = append(have, p.name)
			}
		}
	}
	switch {
	case want == "" && len(have) > 0:
		return fmt.Errorf("saved %s does not belong to a %s change", strings.Join(have, ", "), c.Kind)
	case want != "" && !slices.Equal(have, []string{want}):
		return fmt.Errorf("a %s change needs exactly its saved %s, has %v", c.Kind, want, have)
	}
	switch want {
	case "nft":
		return validateSavedNft(*s.Nft, c.Family, c.Table)
	case "module":
		m := releaseName.FindStringSubmatch(s.Module.Path)
		if m == nil || ValidModulePath(s.Module.Path, m[1]) != nil {
			return fmt.Errorf("saved module file %q", s.Module.Path)
		}
		if moduleNameOf(s.Module.Path) != strings.ReplaceAll(c.Module, "-", "_") {
			return fmt.Errorf("saved module file %q is not module %s", s.Module.Path, c.Module)
		}
		for _, w := range strings.Fields(s.Module.Params) {
			if !moduleParam.MatchString(w) {
				return fmt.Errorf("saved module parameter %q", w)
			}
		}
		if s.Module.Params != strings.Join(strings.Fields(s.Module.Params), " ") {
			return errors.New("saved module parameters are not single-spaced")
		}
	case "thread":
		if len(s.Thread.Comm) > 64 || !utf8.ValidString(s.Thread.Comm) {
			return errors.New("saved thread name")
		}
	case "file":
		f := s.File
		if len(f.Contents) > 1<<20 || !utf8.ValidString(f.Contents) || f.Mode > 0o777 || f.UID < 0 || f.GID < 0 {
			return errors.New("saved file copy")
		}
	}
	return nil
}
