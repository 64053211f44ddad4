package report

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The version's text names the async-profiler and where it comes from;
// its JSON is the bare object.
func TestWriteVersion(t *testing.T) {
	v := VersionData{Version: "1.2.3", Go: "go1.26.0", OS: "linux", Arch: "amd64", AsyncProfiler: AsyncProfilerVersion{Version: "4.1"}}
	for _, tc := range []struct {
		ap   AsyncProfilerVersion
		want string
	}{
		{AsyncProfilerVersion{Version: "4.1"}, "async-profiler 4.1, not bundled (perfscope jvm takes it from --async-profiler, asprof on PATH or Maven)\n"},
		{AsyncProfilerVersion{Version: "4.1", Bundled: "/usr/lib/perfscope/libasyncProfiler.so"}, "async-profiler 4.1, bundled: /usr/lib/perfscope/libasyncProfiler.so\n"},
		{AsyncProfilerVersion{Version: "4.1", BundleError: "checksum mismatch"}, "async-profiler 4.1, bundled library refused: checksum mismatch\n"},
	} {
		v.AsyncProfiler = tc.ap
		var b bytes.Buffer
		if err := WriteVersion(&b, v, Text); err != nil || b.String() != "perfscope 1.2.3 (go1.26.0 linux/amd64)\n"+tc.want {
			t.Errorf("%v %q", err, b.String())
		}
	}
	var b bytes.Buffer
	var back VersionData
	if err := WriteVersion(&b, v, JSON); err != nil || json.Unmarshal(b.Bytes(), &back) != nil || back != v {
		t.Errorf("json %v %s", err, b.String())
	}
}
