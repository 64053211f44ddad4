package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/perfscope/perfscope/jvm/asprof"
)

// VersionData is what `perfscope version` prints: perfscope's build and
// the async-profiler `perfscope jvm` loads. Its JSON is this object
// alone, without the envelope, as it has always been.
type VersionData struct {
	Version       string               `json:"version"`
	Go            string               `json:"go"`
	OS            string               `json:"os"`
	Arch          string               `json:"arch"`
	AsyncProfiler AsyncProfilerVersion `json:"async_profiler"`
}

// AsyncProfilerVersion says which async-profiler `perfscope jvm` loads
// and whether this perfscope carries it (the container image does).
type AsyncProfilerVersion struct {
	Version string `json:"version"`
	// Bundled is the library packaged with this binary; empty when none
	// is, and `perfscope jvm` then finds one on the host or through Maven.
	Bundled string `json:"bundled,omitempty"`
	// BundleError says why a packaged library is not used.
	BundleError string `json:"bundle_error,omitempty"`
}

// NewVersionData is perfscope's build (version) with the async-profiler
// locator finds packaged beside the binary.
func NewVersionData(version string, locator asprof.Locator) VersionData {
	ap := AsyncProfilerVersion{Version: asprof.Version}
	if lib, err := locator.Bundled(); err == nil {
		ap.Bundled = lib
	} else if !errors.Is(err, os.ErrNotExist) {
		ap.BundleError = err.Error()
	}
	return VersionData{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, AsyncProfiler: ap}
}

// WriteVersion writes v in format f: its JSON object, or two lines of
// text.
func WriteVersion(w io.Writer, v VersionData, f Format) error {
	if f == JSON {
		return WriteJSON(w, v)
	}
	if _, err := fmt.Fprintf(w, "perfscope %s (%s %s/%s)\n", v.Version, v.Go, v.OS, v.Arch); err != nil {
		return err
	}
	ap := v.AsyncProfiler
	var err error
	switch {
	case ap.Bundled != "":
		_, err = fmt.Fprintf(w, "async-profiler %s, bundled: %s\n", ap.Version, ap.Bundled)
	case ap.BundleError != "":
		_, err = fmt.Fprintf(w, "async-profiler %s, bundled library refused: %s\n", ap.Version, ap.BundleError)
	default:
		_, err = fmt.Fprintf(w, "async-profiler %s, not bundled (perfscope jvm takes it from --async-profiler, asprof on PATH or Maven)\n", ap.Version)
	}
	return err
}
