package report

import (
	"context"
	"path/filepath"

	"github.com/perfscope/perfscope/flame"
)

// WriteFlameFiles writes a run's stacks to folded (folded stacks) and
// flamePath (a flame graph, .svg or .html) and lists the files in r's
// artifacts; an empty path writes nothing. A file that cannot be written
// is flame.WriteFile's error, which the caller words.
func WriteFlameFiles(r *Report, fp *flame.Profile, flamePath, folded string, opts flame.Options) error {
	write := func(path, kind string, out flame.Output, opts flame.Options) error {
		if err := flame.WriteFile(context.Background(), path, fp, out, opts); err != nil {
			return err
		}
		abs, _ := filepath.Abs(path)
		r.Artifacts = append(r.Artifacts, Artifact{Kind: kind, Path: abs})
		return nil
	}
	if folded != "" {
		if err := write(folded, "folded", flame.OutputFolded, flame.Options{}); err != nil {
			return err
		}
	}
	if flamePath != "" {
		out, _ := flame.OutputOf(flamePath) // the CLI allowed .svg and .html only
		return write(flamePath, "flamegraph", out, opts)
	}
	return nil
}
