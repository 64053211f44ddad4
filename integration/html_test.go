package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/lab/netlab"
)

// maxUDPPage is what a default (10 s) `perfscope udp -o html` page may
// weigh: small enough to attach to a ticket.
const maxUDPPage = 2 << 20

// A default 10 s `perfscope udp -o html` on the lab, a flooded server
// with a small receive buffer: one self-contained page under 2 MB, its
// findings and sections there, its flame graphs drawn, and it loads in
// headless chromium without a console error.
func TestUDPHTMLOnLab(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	testutil.Chromium(t)
	lab, err := netlab.New(context.Background(), netlab.Config{Queues: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	ctx, _, stop := startUDPLab(t, lab, udpRun{mode: "single", threads: 2, senders: 2, rcvbuf: 4096, floodFor: 14 * time.Second})
	defer stop()

	var out, stderr bytes.Buffer
	cmd := lab.Command(ctx, lab.ReceiverNS, Perfscope(t), "udp", "--iface", lab.ReceiverIf, "--port", fmt.Sprint(labPort), "-o", "html")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perfscope udp -o html: %v\n%s", err, stderr.String())
	}
	page := out.String()
	t.Logf("page: %d bytes", len(page))
	if len(page) > maxUDPPage {
		t.Errorf("the page is %d bytes, over %d", len(page), maxUDPPage)
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Fatalf("not a whole page:\n%.500s", page)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//|url\(\s*['"]?(https?:)?//|@import`).FindString(page); m != "" {
		t.Errorf("the page fetches from the network: %q", m)
	}
	for _, want := range []string{`data-finding="net.udp-rcvbuf"`, `id="softirq"`, `id="queues"`, `id="drops"`, `id="sockets"`, `id="cost"`, `id="obtained"`,
		"CPUs running NET_RX", "overhead.bpf_time_share"} {
		if !strings.Contains(page, want) {
			t.Errorf("%s missing from the page", want)
		}
	}
	// Kept beside the screenshot (testutil.ArtifactDir) for a person to
	// open.
	path := filepath.Join(testutil.ArtifactDir(t), "udp-lab.html")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got := testutil.LoadInChromium(t, path, "udp-lab", 1200, 3000)
	if len(got.Console) > 0 {
		t.Errorf("console:\n%s", strings.Join(got.Console, "\n"))
	}
	frames := regexp.MustCompile(`<iframe[^>]*data-frames="(\d+)"`).FindAllStringSubmatch(got.DOM, -1)
	if len(frames) == 0 || !strings.Contains(got.DOM, `data-ready="1"`) {
		t.Errorf("the page's script or its flame graphs did not run (%d graphs drawn)", len(frames))
	}
	for _, f := range frames {
		if f[1] == "0" {
			t.Error("a flame graph drew no frames")
		}
	}
}
