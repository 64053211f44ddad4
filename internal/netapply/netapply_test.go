package netapply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/diagnose"
)

// recorder is a fake Runner: it records commands and fails the one named
// in failOn.
type recorder struct {
	ran    []string
	failOn string
	// sysctls is what sysctl -n reads back; writes update it unless the
	// key is in readOnly (where sysctl -w still exits 0, as procps does).
	sysctls  map[string]string
	readOnly map[string]bool
}

func (r *recorder) Run(_ context.Context, command string) ([]byte, error) {
	if key, ok := strings.CutPrefix(command, "sysctl -n "); ok {
		return []byte(r.sysctls[key] + "\n"), nil
	}
	r.ran = append(r.ran, command)
	if command == r.failOn {
		return []byte("ethtool: Operation not supported\n"), errors.New("exit status 1")
	}
	if key, value, ok := sysctlWrite(command); ok && !r.readOnly[key] {
		if r.sysctls == nil {
			r.sysctls = map[string]string{}
		}
		r.sysctls[key] = value
	}
	return []byte("ok\n"), nil
}

func findings() []diagnose.Finding {
	return []diagnose.Finding{
		{ID: "net.xps-unset", Title: "XPS unset", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting,
			Apply:  []string{"echo 1 > /sys/class/net/eth0/queues/tx-0/xps_cpus", "echo 2 > /sys/class/net/eth0/queues/tx-1/xps_cpus"},
			Revert: []string{"echo 0 > /sys/class/net/eth0/queues/tx-0/xps_cpus", "echo 0 > /sys/class/net/eth0/queues/tx-1/xps_cpus"}}},
		{ID: "net.gro-udp", Title: "GRO on\nfor UDP", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting,
			Apply: []string{"ethtool -K eth0 gro off"}, Revert: []string{"ethtool -K eth0 gro on"}}},
		{ID: "net.socket-lock-contention", Recommendation: diagnose.Recommendation{Kind: diagnose.KindCode}},
		{ID: "net.dead-rx-queues", Recommendation: diagnose.Recommendation{Kind: diagnose.KindAdvice}},
		{ID: "net.udp-rcvbuf", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting,
			Apply: []string{"sysctl -w net.core.rmem_max=8388608"}}},
	}
}

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name    string
		ids     []string
		want    []string
		wantErr string
	}{
		{name: "user order kept, duplicates once", ids: []string{"net.gro-udp", "net.xps-unset", "net.gro-udp"}, want: []string{"net.gro-udp", "net.xps-unset"}},
		{name: "unknown id lists the valid ones", ids: []string{"net.nope"}, wantErr: `"net.nope" is not a finding of this run (not an applicable setting; applicable IDs: net.gro-udp, net.xps-unset)`},
		{name: "code change refused", ids: []string{"net.xps-unset", "net.socket-lock-contention"}, wantErr: "recommends a code change, which perfscope never applies"},
		{name: "advice refused", ids: []string{"net.dead-rx-queues"}, wantErr: "recommends advice for a human decision"},
		{name: "setting without revert refused", ids: []string{"net.udp-rcvbuf"}, wantErr: "no apply and revert commands"},
		{name: "no ids", ids: nil, wantErr: "needs at least one finding ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(findings(), tt.ids)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrNotApplicable) {
					t.Fatalf("err = %v, want containing %q and wrapping ErrNotApplicable", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.IDs(), tt.want) {
				t.Fatalf("ids = %v, want %v", p.IDs(), tt.want)
			}
		})
	}
}

func TestScriptRevertsInReverseAndParsesBack(t *testing.T) {
	p, err := NewPlan(findings(), []string{"net.xps-unset", "net.gro-udp"})
	if err != nil {
		t.Fatal(err)
	}
	text := Script(p, "host1", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, want := range []string{"#!/bin/sh\n" + Marker + "\n", "# Host: host1", "2026-01-02T03:04:05Z", "set -e\n", "# net.gro-udp: GRO on for UDP\n", "--apply net.xps-unset net.gro-udp"} {
		if !strings.Contains(text, want) {
			t.Errorf("script lacks %q:\n%s", want, text)
		}
	}
	cmds, err := RevertCommands([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ethtool -K eth0 gro on", "echo 0 > /sys/class/net/eth0/queues/tx-0/xps_cpus", "echo 0 > /sys/class/net/eth0/queues/tx-1/xps_cpus"}
	if !slices.Equal(cmds, want) {
		t.Fatalf("commands = %q, want %q", cmds, want)
	}
}

func TestApplyNeedsRevertScriptFirst(t *testing.T) {
	p, _ := NewPlan(findings(), []string{"net.gro-udp"})
	r := &recorder{}
	if _, err := Apply(context.Background(), p, r); err == nil || len(r.ran) != 0 {
		t.Fatalf("Apply without a revert script: err=%v ran=%v", err, r.ran)
	}
}

func TestApplyAndRevert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "revert")
	p, _ := NewPlan(findings(), []string{"net.xps-unset", "net.gro-udp"})
	path, err := WriteRevertScript(dir, &p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o700 || p.RevertScript != path {
		t.Fatalf("script %s: %v mode %v plan path %q", path, err, st.Mode(), p.RevertScript)
	}
	r := &recorder{}
	done, err := Apply(context.Background(), p, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 3 || done[2].FindingID != "net.gro-udp" || done[2].Output != "ok" {
		t.Fatalf("executed = %+v", done)
	}
	rr := &recorder{}
	if _, err := Revert(context.Background(), path, rr); err != nil {
		t.Fatal(err)
	}
	if len(rr.ran) != 3 || rr.ran[0] != "ethtool -K eth0 gro on" {
		t.Fatalf("revert ran %q", rr.ran)
	}
}

func TestApplyStopsAtFirstFailure(t *testing.T) {
	p, _ := NewPlan(findings(), []string{"net.xps-unset", "net.gro-udp"})
	path, err := WriteRevertScript(t.TempDir(), &p)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{failOn: "echo 2 > /sys/class/net/eth0/queues/tx-1/xps_cpus"}
	done, err := Apply(context.Background(), p, r)
	var ce *CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *CommandError", err)
	}
	if len(done) != 1 || len(r.ran) != 2 || ce.Ran != 1 || ce.FindingID != "net.xps-unset" {
		t.Fatalf("done=%v ran=%v err=%+v", done, r.ran, ce)
	}
	msg := err.Error()
	for _, want := range []string{"tx-1/xps_cpus", "Operation not supported", "1 command(s) ran before it", "--revert " + path} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// The first command failing changed nothing.
	r = &recorder{failOn: "echo 1 > /sys/class/net/eth0/queues/tx-0/xps_cpus"}
	if _, err := Apply(context.Background(), p, r); err == nil || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err = %v", err)
	}
}

func TestApplyCancelled(t *testing.T) {
	p, _ := NewPlan(findings(), []string{"net.gro-udp"})
	if _, err := WriteRevertScript(t.TempDir(), &p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &recorder{}
	if _, err := Apply(ctx, p, r); !errors.Is(err, context.Canceled) || len(r.ran) != 0 {
		t.Fatalf("err=%v ran=%v", err, r.ran)
	}
}

func TestRevertRefusesForeignScripts(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"plain.sh": "#!/bin/sh\nrm -rf /tmp/x\n",
		"empty.sh": "",
		"late.sh":  "#!/bin/sh\n# hello\n" + Marker + "\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &recorder{}
		if _, err := Revert(context.Background(), path, r); !errors.Is(err, ErrNotRevertScript) || len(r.ran) != 0 {
			t.Errorf("%s: err=%v ran=%v", name, err, r.ran)
		}
	}
	if _, err := Revert(context.Background(), filepath.Join(dir, "missing.sh"), &recorder{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestRevertStopsAtFailure(t *testing.T) {
	p, _ := NewPlan(findings(), []string{"net.xps-unset"})
	path, err := WriteRevertScript(t.TempDir(), &p)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{failOn: "echo 0 > /sys/class/net/eth0/queues/tx-0/xps_cpus"}
	_, err = Revert(context.Background(), path, r)
	if err == nil || !strings.Contains(err.Error(), "run "+path+" again") || len(r.ran) != 1 {
		t.Fatalf("err=%v ran=%v", err, r.ran)
	}
}

func TestShellRunner(t *testing.T) {
	out, err := Shell{}.Run(context.Background(), "echo hi; echo err >&2")
	if err != nil || string(out) != "hi\nerr\n" {
		t.Fatalf("out=%q err=%v", out, err)
	}
	if _, err := (Shell{}).Run(context.Background(), "exit 3"); err == nil {
		t.Fatal("exit 3 succeeded")
	}
}

// TestShellApplyAndRevertEndToEnd drives the production runner through a
// whole apply and revert on a file standing in for a /sys knob.
func TestShellApplyAndRevertEndToEnd(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, "rps_cpus")
	if err := os.WriteFile(knob, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := []diagnose.Finding{{ID: "net.rps-needed", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting,
		Apply: []string{"echo 3 > " + knob}, Revert: []string{"echo 0 > " + knob}}}}
	p, err := NewPlan(fs, []string{"net.rps-needed"})
	if err != nil {
		t.Fatal(err)
	}
	script, err := WriteRevertScript(dir, &p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(context.Background(), p, Shell{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "3\n" {
		t.Fatalf("after apply: %q", b)
	}
	if _, err := Revert(context.Background(), script, Shell{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(knob); string(b) != "0\n" {
		t.Fatalf("after revert: %q", b)
	}
	// The script also works on its own, as its header says.
	if err := os.WriteFile(knob, []byte("3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := (Shell{}).Run(context.Background(), "sh "+script); err != nil {
		t.Fatalf("sh %s: %v %s", script, err, out)
	}
	if b, _ := os.ReadFile(knob); string(b) != "0\n" {
		t.Fatalf("after sh: %q", b)
	}
}

func TestApplyReadsSysctlsBack(t *testing.T) {
	dir := t.TempDir()
	fs := []diagnose.Finding{{ID: "net.udp-rcvbuf", Recommendation: diagnose.Recommendation{Kind: diagnose.KindSetting,
		Apply:  []string{"sysctl -w net.core.rmem_max=1048576", "sysctl -w net.core.rmem_default=1048576"},
		Revert: []string{"sysctl -w net.core.rmem_default=212992", "sysctl -w net.core.rmem_max=212992"}}}}
	plan, err := NewPlan(fs, []string{"net.udp-rcvbuf"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteRevertScript(dir, &plan); err != nil {
		t.Fatal(err)
	}
	// Taken: both writes read back.
	ok := &recorder{}
	if done, err := Apply(context.Background(), plan, ok); err != nil || len(done) != 2 {
		t.Fatalf("apply: %v, %d done", err, len(done))
	}
	// Refused with exit 0 (a read-only key in a network namespace): the
	// second command fails, and the error says why and how to undo.
	ro := &recorder{sysctls: map[string]string{"net.core.rmem_default": "212992"}, readOnly: map[string]bool{"net.core.rmem_default": true}}
	done, err := Apply(context.Background(), plan, ro)
	var ce *CommandError
	if !errors.As(err, &ce) || len(done) != 1 || ce.Ran != 1 {
		t.Fatalf("apply on a read-only key: %v, %d done", err, len(done))
	}
	for _, want := range []string{"the kernel kept net.core.rmem_default = 212992", "read-only", "perfscope udp --revert"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestSysctlWrite(t *testing.T) {
	for cmd, want := range map[string]string{
		"sysctl -w net.core.rmem_max=8388608":            "net.core.rmem_max 8388608",
		"sysctl -qw net.ipv4.conf.all.rp_filter=0":       "net.ipv4.conf.all.rp_filter 0",
		"sysctl net.core.rmem_max":                       "",
		"echo 1 > /proc/sys/net/core/rmem_max":           "",
		"sysctl -w net.ipv4.tcp_rmem=4096 87380 6291456": "",
	} {
		k, v, ok := sysctlWrite(cmd)
		got := ""
		if ok {
			got = k + " " + v
		}
		if got != want {
			t.Errorf("sysctlWrite(%q) = %q, want %q", cmd, got, want)
		}
	}
}
