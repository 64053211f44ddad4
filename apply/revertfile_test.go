package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/internal/testutil"
)

// appliedFile applies everything on a fake host and returns the revert
// file's path and bytes.
func appliedFile(t *testing.T) (*System, string, []byte) {
	t.Helper()
	sys := fakeSystem(t)
	res, err := applyAll(t, sys, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(res.RevertFile)
	if err != nil {
		t.Fatal(err)
	}
	return sys, res.RevertFile, data
}

// tamper rewrites one field of a valid revert file (as JSON) and keeps
// the file's mode, so that only the content is judged.
func tamper(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	data, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.Marshal(m)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func change(m map[string]any, i int) map[string]any {
	return m["changes"].([]any)[i].(map[string]any)["change"].(map[string]any)
}

// TestRevertFileRefusesTampering: --revert does only what a rule could
// have asked --apply to do; anything else is refused before any change.
func TestRevertFileRefusesTampering(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(m map[string]any)
	}{
		{"write anywhere", "does not write", func(m map[string]any) { change(m, 2)["path"] = "/etc/shadow" }},
		{"path traversal through the interface", "does not write", func(m map[string]any) {
			change(m, 2)["path"] = "/sys/class/net/../../../etc/queues/rx-0/rps_cpus"
		}},
		{"sysctl outside net", "not under net", func(m map[string]any) { change(m, 0)["key"] = "kernel.core_pattern" }},
		{"value with a newline", "printable", func(m map[string]any) { change(m, 0)["old"] = "1\nkernel.x=1" }},
		{"unknown kind", "unknown kind", func(m map[string]any) { change(m, 0)["kind"] = "shell" }},
		{"unknown field", "unknown field", func(m map[string]any) { m["exec"] = "sh -c id" }},
		{"shell rendition edited", "shell rendition does not match", func(m map[string]any) {
			m["shell"] = append(m["shell"].([]any), "touch /tmp/pwned")
		}},
		{"audit locked forever", "is not one of 0, 1", func(m map[string]any) { change(m, 16)["old"] = "2" }},
		{"module from another directory", "saved module file", func(m map[string]any) {
			m["changes"].([]any)[14].(map[string]any)["saved"].(map[string]any)["module"].(map[string]any)["path"] = "/tmp/evil.ko"
		}},
		{"other format", "format", func(m map[string]any) { m["format"] = "perfscope revert script v1" }},
		{"a command that applies nothing", "run command", func(m map[string]any) { m["run"].(map[string]any)["command"] = "jvm" }},
		{"finding not in the run", "is not one of the run's", func(m map[string]any) {
			m["changes"].([]any)[0].(map[string]any)["finding"] = "net.other"
		}},
		// A sysctl, interface, module or value the finding's rule never
		// touches: valid changes in themselves, but not that rule's.
		{"ip_forward under rp-filter", "is not a change its rule makes", func(m map[string]any) {
			change(m, 0)["key"], change(m, 0)["old"], change(m, 0)["new"] = "net.ipv4.ip_forward", "1", "0"
		}},
		{"tcp_syncookies under rp-filter", "is not a change its rule makes", func(m map[string]any) {
			change(m, 0)["key"], change(m, 0)["old"], change(m, 0)["new"] = "net.ipv4.tcp_syncookies", "0", "1"
		}},
		{"another interface", "is not a change its rule makes", func(m map[string]any) {
			change(m, 0)["key"] = "net.ipv4.conf.eth9.rp_filter"
		}},
		{"rp_filter restored to 0", "is not a change its rule makes", func(m map[string]any) { change(m, 0)["old"] = "0" }},
		{"rp_filter's run_old", "run_old", func(m map[string]any) { m["changes"].([]any)[0].(map[string]any)["run_old"] = "5" }},
		{"udp_mem under rp-filter's finding", "is not a change its rule makes", func(m map[string]any) {
			m["changes"].([]any)[1].(map[string]any)["finding"] = "net.rp-filter"
		}},
		{"another module", "is not a change its rule makes", func(m map[string]any) { change(m, 14)["module"] = "nf_conntrack" }},
		{"SMT back to forceoff", "is not a change its rule makes", func(m map[string]any) { change(m, 6)["old"] = "forceoff" }},
		{"a finding of no rule", "is not one of perfscope's rules", func(m map[string]any) {
			m["run"].(map[string]any)["findings"] = append(m["run"].(map[string]any)["findings"].([]any), "net.forward")
			m["changes"].([]any)[0].(map[string]any)["finding"] = "net.forward"
		}},
		// encoding/json alone matches keys without regard to case.
		{"a key in capitals", "unknown field \"OLD\"", func(m map[string]any) {
			c := change(m, 0)
			c["OLD"] = c["old"]
			delete(c, "old")
		}},
		{"a top-level key in capitals", "unknown field \"Changes\"", func(m map[string]any) {
			m["Changes"] = m["changes"]
			delete(m, "changes")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, path, _ := appliedFile(t)
			tamper(t, path, tc.edit)
			before := sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter")
			_, err := Revert(context.Background(), path, sys, testIdentity)
			if !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadRevertFile containing %q", err, tc.want)
			}
			if sys.file(t, "/proc/sys/net/ipv4/conf/"+hostile+"/rp_filter") != before {
				t.Error("a refused revert file changed something")
			}
		})
	}
}

// A key given twice is refused: encoding/json keeps the last, which a
// reader of the file may not.
func TestRevertFileRefusesRepeatedKey(t *testing.T) {
	_, path, data := appliedFile(t)
	doubled := bytes.Replace(data, []byte(`"old": "1"`), []byte(`"old": "2", "old": "1"`), 1)
	if bytes.Equal(doubled, data) {
		t.Fatal("fixture lacks the rp_filter change")
	}
	os.WriteFile(path, doubled, 0o600)
	if _, err := ReadRevertFile(path); !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), `key "old" is given twice in the file.changes[0].change`) {
		t.Fatalf("err = %v", err)
	}
}

// A revert file an --apply killed at its creation left empty, or while
// writing left cut off, says so: it recorded nothing and nothing was
// changed (the changes start once the file is complete and synced).
func TestRevertFileEmptyOrCutOff(t *testing.T) {
	_, path, data := appliedFile(t)
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "empty: the --apply that created it was killed before it recorded anything", nil},
		{"cut off", fmt.Sprintf("it ends mid-document after %d bytes: an --apply killed while writing it", len(data)/2), data[:len(data)/2]},
	} {
		os.WriteFile(path, tc.data, 0o600)
		_, err := ReadRevertFile(path)
		if !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "not perfscope revert JSON") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRevertFileRefusesOldScripts: the shell-script format of earlier
// releases is not a revert file any more.
func TestRevertFileRefusesOldScripts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "perfscope-revert-old.sh")
	os.WriteFile(path, []byte("#!/bin/sh\n# perfscope revert script v1\nset -e\ntouch pwned\n"), 0o600)
	if _, err := ReadRevertFile(path); !errors.Is(err, ErrBadRevertFile) {
		t.Fatalf("err = %v", err)
	}
}

// TestRevertFileModeAndPlace: a file others can
// write, a link, or a file in a directory others can write is refused.
func TestRevertFileModeAndPlace(t *testing.T) {
	_, path, data := appliedFile(t)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRevertFile(path); !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("world-writable file: %v", err)
	}
	os.Chmod(path, 0o600)
	link := filepath.Join(filepath.Dir(path), "link.json")
	os.Symlink(path, link)
	if _, err := ReadRevertFile(link); !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	open := t.TempDir()
	os.Chmod(open, 0o777)
	p := filepath.Join(open, "r.json")
	os.WriteFile(p, data, 0o600)
	if _, err := ReadRevertFile(p); !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), "without the sticky bit") {
		t.Errorf("file in a world-writable directory: %v", err)
	}
	if _, err := WriteRevertFile(open, &RevertFile{}); err == nil || !strings.Contains(err.Error(), "without the sticky bit") {
		t.Errorf("write into a world-writable directory: %v", err)
	}
	os.Chmod(open, 0o777|os.ModeSticky)
	if _, err := ReadRevertFile(p); err != nil {
		t.Errorf("sticky directory (as /tmp): %v", err)
	}
	// A link to the directory is followed only when root or you own it.
	dirLink := filepath.Join(t.TempDir(), "dir")
	os.Symlink(open, dirLink)
	if d, err := OpenTrustedDir(dirLink); err != nil {
		t.Errorf("your directory link: %v", err)
	} else {
		d.Close()
	}
	if os.Geteuid() == 0 {
		os.Lchown(dirLink, 65534, 65534)
		if _, err := OpenTrustedDir(dirLink); err == nil || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") {
			t.Errorf("another user's directory link: %v", err)
		}
	}
}

// TestRevertFileOwner: a file owned by another user is refused, even with
// the marker of a perfscope file.
func TestRevertFileOwner(t *testing.T) {
	testutil.RequireRoot(t)
	_, path, _ := appliedFile(t)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRevertFile(path); !errors.Is(err, ErrBadRevertFile) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("file of another user: %v", err)
	}
	dir := t.TempDir()
	os.Chown(dir, 65534, 65534)
	if _, err := OpenTrustedDir(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("directory of another user: %v", err)
	}
}

// TestHostWithNewline: the kernel lets a host name hold any byte; it is
// data in the revert file and one quoted line in its shell rendition
// (a newline in it used to add a command).
func TestHostWithNewline(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	id := Identity{Host: "a\nsysctl -w kernel.x=1 \xff", NetNS: testIdentity.NetNS}
	p, _ := NewPlan(everyKind(), []string{"net.audit"})
	res, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	rf, err := ReadRevertFile(res.RevertFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range rf.Shell {
		if strings.Contains(line, "\n") || strings.HasPrefix(line, "sysctl") {
			t.Errorf("host name leaked into the rendition: %q", line)
		}
	}
	id.Host = sanitizeHost(id.Host)
	if _, err := Revert(context.Background(), res.RevertFile, sys, id); err != nil {
		t.Fatal(err)
	}
}

func TestWriteRevertFileIsExclusiveAndPrivate(t *testing.T) {
	dir := t.TempDir()
	rf := RevertFile{Identity: testIdentity, Run: testRun([]string{"net.audit"}), Written: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Changes: []Entry{{FindingID: "net.audit", Change: diagnose.AuditChange(1, 0)}}}
	a, err := WriteRevertFile(dir, &rf)
	if err != nil {
		t.Fatal(err)
	}
	b, err := WriteRevertFile(dir, &rf)
	if err != nil || a == b {
		t.Fatalf("two writes in one second: %s %s %v", a, b, err)
	}
	st, _ := os.Stat(a)
	if st.Mode().Perm() != 0o600 || !strings.HasPrefix(filepath.Base(a), "perfscope-revert-20260102T030405Z-") {
		t.Errorf("%s mode %v", a, st.Mode())
	}
}

// FuzzParseRevertFile feeds the revert-file reader arbitrary bytes: it
// must never panic, and whatever it accepts must validate again and
// survive a write/parse round trip unchanged.
func FuzzParseRevertFile(f *testing.F) {
	dir := f.TempDir()
	sys, err := fakeSystemAt(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	p, _ := NewPlan(everyKind(), allIDs())
	res, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: testRun(p.IDs()), Identity: testIdentity})
	if err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(res.RevertFile)
	f.Add(seed)
	f.Add([]byte(`{"format":"perfscope-revert/v1"}`))
	f.Add([]byte("#!/bin/sh\n# perfscope revert script v1\n"))
	f.Add([]byte(`{"format":"perfscope-revert/v1","changes":[{"change":{"kind":"sysfs","path":"/etc/shadow"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := ParseRevertFile(data)
		if err != nil {
			return
		}
		if err := rf.Validate(); err != nil {
			t.Fatalf("accepted, then invalid: %v", err)
		}
		out, err := json.Marshal(rf)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRevertFile(out)
		if err != nil {
			t.Fatalf("accepted file does not round-trip: %v", err)
		}
		if len(again.Changes) != len(rf.Changes) || !again.Changes[0].Change.Equal(rf.Changes[0].Change) {
			t.Fatal("round trip changed the changes")
		}
	})
}

// TestRevertFileOfATCPRun: `perfscope tcp --apply` writes its revert file
// with run command "tcp"; it must read back (the file is validated before
// any change is made, so a refused one made --apply fail with nothing
// changed) and revert.
func TestRevertFileOfATCPRun(t *testing.T) {
	sys, dir := fakeSystem(t), t.TempDir()
	p, err := NewPlan(everyKind(), allIDs())
	if err != nil {
		t.Fatal(err)
	}
	run := testRun(p.IDs())
	run.Command = "tcp"
	res, err := Apply(context.Background(), p, ApplyOptions{Dir: dir, System: sys, Run: run, Identity: testIdentity})
	if err != nil {
		t.Fatalf("apply of a tcp run: %v", err)
	}
	if _, err := Revert(context.Background(), res.RevertFile, sys, testIdentity); err != nil {
		t.Fatalf("revert of a tcp run's file: %v", err)
	}
}
