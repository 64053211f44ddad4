package podlist

import (
	"os"
	"strings"
	"testing"
)

// Whatever a server answers, decoding a pod list fails or yields pods;
// it never panics.
func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile("testdata/pods-node-1.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add(`{"kind":"PodList","items":[{"status":{"containerStatuses":[{"containerID":"://"}]}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		pods, err := decode(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, p := range pods {
			for id := range p.Containers {
				if id == "" {
					t.Errorf("a container with an empty id: %+v", p)
				}
			}
		}
	})
}
