package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/collectors/procfs"
	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/offcpu"
)

func TestLoadFlagsReachRun(t *testing.T) {
	g := &Globals{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, Started: time.Now()}
	var got *loadOptions
	cmd := loadCmd(g, &loadOptions{proc: procfs.Default, run: func(_ context.Context, o *loadOptions, _ *Globals) error { got = o; return nil }})
	cmd.SetArgs([]string{"--url", "http://127.0.0.1:8080/x", "-c", "2, 4,16", "--duration-per-level", "3s", "--requests-per-level", "500",
		"--method", "post", "--body", "hi", "-H", "X-A: b", "--timeout", "2s", "--stack-every", "4", "-o", "json", "--fail-on", "warn"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	s := got.load.Spec
	if !slices.Equal(got.load.Levels, []int{2, 4, 16}) || got.DurationPerLevel != 3*time.Second || got.RequestsPerLevel != 500 || s.Method != "POST" ||
		string(s.Body) != "hi" || s.Header.Get("X-A") != "b" || s.Timeout != 2*time.Second || got.StackEvery != 4 || got.report.format != "json" {
		t.Fatalf("options = %+v, spec %+v", got, s)
	}
}

// Every bad flag is exit 2 with one sentence, before anything is sent.
func TestLoadUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--url is required"},
		{[]string{"--url", "ftp://x/"}, "not an http(s) URL"},
		{[]string{"--url", "http://127.0.0.1:1/", "-c", "4,2"}, "must rise"},
		{[]string{"--url", "http://127.0.0.1:1/", "-c", "0,2"}, "from 1 to 10000"},
		{[]string{"--url", "http://127.0.0.1:1/", "-c", "1,x"}, "from 1 to 10000"},
		{[]string{"--url", "http://127.0.0.1:1/", "-c", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33"}, "at most 32"},
		{[]string{"--url", "http://127.0.0.1:1/", "--duration-per-level", "0s"}, "bounded in time"},
		{[]string{"--url", "http://127.0.0.1:1/", "--duration-per-level", "1h"}, "bounded in time"},
		{[]string{"--url", "http://127.0.0.1:1/", "--requests-per-level", "-1"}, "--requests-per-level"},
		{[]string{"--url", "http://127.0.0.1:1/", "--timeout", "0s"}, "--timeout"},
		{[]string{"--url", "http://127.0.0.1:1/", "--stack-every", "0"}, "--stack-every"},
		{[]string{"--url", "http://127.0.0.1:1/", "-H", "nocolon"}, "Name:value"},
		{[]string{"--url", "http://127.0.0.1:1/", "--body", "@" + filepath.Join(dir, "missing")}, "--body"},
		{[]string{"--url", "http://127.0.0.1:1/", "--pid", "999999999"}, "no such process"},
		{[]string{"--url", "http://127.0.0.1:1/", "-o", "svg"}, "svg"},
		{[]string{"--url", "http://127.0.0.1:1/", "--fail-on", "loud"}, "loud"},
	} {
		_, stderr, code := execute(t, append([]string{"load"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, ExitUsage, c.want)
		}
	}
}

// Without --pid the service is the local owner of the URL's port: a
// port nobody listens on, or a host that is not this machine, is bad
// input naming --pid; this test's own listener is found as its process.
func TestLoadFindsTheServiceFromThePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	pids, err := offcpu.ServiceOf(fmt.Sprintf("http://localhost:%d/", port), sockets.NewFS("/"))
	l.Close()
	if err != nil {
		t.Skipf("listing listeners needs sock_diag: %v", err)
	}
	if len(pids) != 1 || pids[0] != os.Getpid() {
		t.Errorf("owners of port %d: %v, want this process %d", port, pids, os.Getpid())
	}
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/", port), "http://192.0.2.1:80/"} {
		_, stderr, code := execute(t, "load", "--url", url, "-c", "1", "--duration-per-level", "100ms")
		if code != ExitUsage || !strings.Contains(stderr, "--pid") {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming --pid", url, code, stderr)
		}
	}
}
