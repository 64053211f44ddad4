package cli

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
)

// registerLoadFlags binds the flags of an HTTP load perfscope drives
// while it measures a service (jvm, go) to l; --requests is the
// command's own.
func registerLoadFlags(f *pflag.FlagSet, l *recipes.LoadFlags) {
	f.StringVar(&l.LoadURL, "load", "", "drive --requests HTTP requests at this URL and measure while they run")
	f.StringVar(&l.Method, "method", "GET", "HTTP method of the load")
	f.StringVar(&l.Body, "body", "", "request body of the load; @FILE reads it from a file")
	f.StringArrayVarP(&l.Headers, "header", "H", nil, "request header of the load, Name:value (repeatable)")
	f.IntVarP(&l.Concurrency, "concurrency", "c", 4, "concurrent connections of the load")
}

// checkHeaders refuses a --header that is not one line.
func checkHeaders(headers []string) error { return asUsage(httpload.CheckHeaders(headers)) }

// checkFlameFlags checks --flame (.svg or .html) and --folded before
// anything is measured (and again when they are written).
func checkFlameFlags(flamePath, folded string) error {
	if flamePath != "" && !strings.HasSuffix(flamePath, ".svg") && !strings.HasSuffix(flamePath, ".html") {
		return usageError("--flame %s: the file name must end in .svg or .html", flamePath)
	}
	for _, out := range []struct{ flag, path string }{{"--flame", flamePath}, {"--folded", folded}} {
		if out.path == "" {
			continue
		}
		if err := safeio.CheckOutput(out.path); err != nil {
			return usageError("%s: cannot write %s: %v", out.flag, out.path, err)
		}
	}
	return nil
}

// writeFlameFlags writes a run's stacks to --folded and --flame
// (report.WriteFlameFiles); a file that cannot be written is bad input.
func writeFlameFlags(r *report.Report, fp *flame.Profile, flamePath, folded string, opts flame.Options) error {
	err := report.WriteFlameFiles(r, fp, flamePath, folded, opts)
	if isBadInputFile(err) {
		return asUsage(err)
	}
	return err
}
