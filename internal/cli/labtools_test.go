package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/perfscope/perfscope/report"
)

// The lab's tools print the envelope every command prints, their counts
// in its data.
func TestLabToolsPrintTheEnvelope(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	for _, tc := range []struct {
		args    []string
		command string
		fields  []string
	}{
		{[]string{"lab", "udp-server", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--threads", "1", "--for", "100ms"}, "lab udp-server", []string{"received", "sockets", "mode"}},
		{[]string{"lab", "udp-flood", "--target", fmt.Sprintf("127.0.0.1:%d", port), "--senders", "1", "--duration", "100ms", "--max-packets", "1000"}, "lab udp-flood", []string{"sent", "errors", "elapsed_ns"}},
	} {
		stdout, stderr, code := execute(t, tc.args...)
		var doc struct {
			Schema   string         `json:"schema"`
			Command  string         `json:"command"`
			Meta     report.Meta    `json:"meta"`
			Data     map[string]any `json:"data"`
			Findings []any          `json:"findings"`
		}
		if code != ExitOK || json.Unmarshal([]byte(stdout), &doc) != nil {
			t.Fatalf("%v: exit %d %q %q", tc.args, code, stdout, stderr)
		}
		if doc.Schema != report.Schema || doc.Command != tc.command || doc.Meta.Version == "" || doc.Findings == nil {
			t.Errorf("%v: envelope %s", tc.args, stdout)
		}
		for _, f := range tc.fields {
			if _, ok := doc.Data[f]; !ok {
				t.Errorf("%v: data lacks %s: %s", tc.args, f, stdout)
			}
		}
	}
}
