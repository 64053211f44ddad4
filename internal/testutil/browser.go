package testutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Chromium is the path of Debian's chromium (scripts/deps.sh test
// installs it). Without it the test is skipped, or fails with
// PERFSCOPE_REQUIRE_ROOT_TESTS=1 (CI), as a root test would.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PERFSCOPE_REQUIRE_ROOT_TESTS") == "1" {
		t.Fatal("chromium is not installed (scripts/deps.sh test), and PERFSCOPE_REQUIRE_ROOT_TESTS=1")
	}
	t.Skip("needs chromium (scripts/deps.sh test)")
	return ""
}

// ArtifactDir is where tests leave files for a person to look at (the
// browser's screenshots): $PERFSCOPE_TEST_ARTIFACTS when set (CI keeps
// it), else a directory the test removes.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("PERFSCOPE_TEST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("artifact dir: %v", err)
		}
		return d
	}
	return t.TempDir()
}

// consoleLine is a line chromium logs (--enable-logging=stderr) for a
// page's console message or uncaught exception.
var consoleLine = regexp.MustCompile(`(?m)^.*:(INFO|WARNING|ERROR):CONSOLE[^\]]*\] (.*)$`)

// BrowserPage is what headless chromium saw of a page.
type BrowserPage struct {
	// DOM is the document after its scripts ran (--dump-dom).
	DOM string
	// Console is every console message and uncaught exception, as
	// chromium logged them.
	Console []string
	// Screenshot is the PNG chromium took, in ArtifactDir.
	Screenshot string
}

// LoadInChromium opens the HTML file page in headless chromium twice:
// once to dump the DOM after scripts ran and collect the console, once to
// take a screenshot named name.png in ArtifactDir. The page is opened
// from a file: it must need nothing from the network, and chromium is
// started with networking pointed nowhere to prove it.
func LoadInChromium(t testing.TB, page, name string, width, height int) BrowserPage {
	t.Helper()
	bin := Chromium(t)
	profile := t.TempDir()
	common := []string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
		"--disable-background-networking", "--disable-sync", "--disable-component-update",
		// No proxy reachable: a page that fetches anything logs an error.
		"--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
		"--enable-logging=stderr", "--v=0", "--user-data-dir=" + profile}
	url := "file://" + page
	run := func(args ...string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), common...), args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, tail(errb.String(), 2000))
		}
		return out.String(), errb.String()
	}
	var p BrowserPage
	dom, stderr := run("--dump-dom", url)
	p.DOM = dom
	for _, m := range consoleLine.FindAllStringSubmatch(stderr, -1) {
		p.Console = append(p.Console, m[2])
	}
	if strings.Contains(stderr, "net::ERR_") {
		p.Console = append(p.Console, "network: "+tail(stderr, 500))
	}
	dir := ArtifactDir(t)
	p.Screenshot = filepath.Join(dir, name+".png")
	run(fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars", "--screenshot="+p.Screenshot, url)
	if st, err := os.Stat(p.Screenshot); err != nil || st.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot %s: %v", p.Screenshot, err)
	}
	t.Logf("screenshot: %s", p.Screenshot)
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
