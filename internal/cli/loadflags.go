package cli

import (
	"strings"

	"github.com/perfscope/perfscope/base/httpload"
	"github.com/perfscope/perfscope/base/safeio"
	"github.com/perfscope/perfscope/flame"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/report"
	"github.com/spf13/cobra"
)

// newServiceFlags registers the flags of a command that measures one
// service (go, jvm): its recipe's parameters it shares with the other (the
// pid or workload, the window, the load perfscope drives, the request
// sources) and params. --body @FILE is body_file.
func newServiceFlags(cmd *cobra.Command, w *workloadFlags, recipe string, params ...string) *recipeFlags {
	f := cmd.Flags()
	rf := newRecipeFlags(cmd, recipe, append([]string{"pid/p", "duration/d", "requests/n", "load", "method", "body", "header/H", "concurrency/c",
		"requests_from", "requests_metric", "count", "http_port", "top"}, params...)...)
	rf.flag["body_file"] = "--body @FILE"
	f.Lookup("body").Usage += "; @FILE reads it from a file"
	pid := f.Lookup("pid")
	pid.Usage = strings.Replace(pid.Usage, "(required)", "(required, or --cgroup, --container or --pod)", 1)
	w.register(f)
	return rf
}

// loadService is load with the load flags in the recipe's terms: --method
// post is POST, --body @FILE is body_file; a --header is one line.
func (rf *recipeFlags) loadService(src measure.Sources) (*recipes.Plan, error) {
	rf.set["method"] = strings.ToUpper(rf.value("method"))
	if file, ok := strings.CutPrefix(rf.value("body"), "@"); ok {
		rf.set["body"], rf.set["body_file"] = "", file
	}
	if err := checkHeaders(rf.fs.Lookup("header").Value.(*paramText).items); err != nil {
		return nil, err
	}
	return rf.load(src)
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
