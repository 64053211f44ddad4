package asprof

import (
	"os"
	"strings"
	"testing"
)

// The Dockerfile and scripts/dist.sh extract the libraries the image
// carries and check their digests themselves; they must pin the bytes
// this package verifies before it uses a bundled library.
func TestImageRecipesPinTheSameBytes(t *testing.T) {
	for _, f := range []string{"../../Dockerfile", "../../scripts/dist.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{ArtifactSHA256, LibrarySHA256["linux-x64"], LibrarySHA256["linux-arm64"], "async-profiler/" + Version} {
			if !strings.Contains(s, want) && !strings.Contains(s, strings.TrimPrefix(want, "async-profiler/")) {
				t.Errorf("%s does not pin %s", f, want)
			}
		}
		if !strings.Contains(s, "lib/perfscope/async-profiler") {
			t.Errorf("%s does not lay the library out where Bundled looks (%s)", f, BundleDir)
		}
	}
}
