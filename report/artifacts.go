package report

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"

	"github.com/perfscope/perfscope/base/safeio"
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

// OutputFile is one file a recipe's outputs name: Name in the directory
// Dir, in Format. A graph format draws Stacks under Title. Place is the
// output's place in the recipe, which an error names.
type OutputFile struct {
	Dir, Name string
	Format    Format
	Stacks    *flame.Profile
	Title     string
	Place     string
}

// Graph says whether the file is drawn from stacks rather than rendered
// from the report.
func (f OutputFile) Graph() bool { return f.Format != JSON && f.Format != Text }

var artifactKinds = map[Format]string{
	Folded: "folded", SVG: "flamegraph-svg", HTML: "flamegraph-html",
	Pprof: "pprof", Speedscope: "speedscope", JSON: "report-json", Text: "report-text",
}

// WriteOutputFiles writes files, graphs first so the reports written
// after list them, and adds each to r's artifacts. perfscope runs as
// root: every file is created through its directory's descriptor (never
// through a planted link, never in a directory swapped in since) and
// renamed into place once whole (safeio.Dir). dirs holds the directories
// the caller checked and opened before the run (safeio.OpenPrivateDir);
// one not there is opened now by the same rules. All are closed when
// this returns.
func WriteOutputFiles(r *Report, files []OutputFile, dirs map[string]*safeio.Dir) error {
	files = append([]OutputFile(nil), files...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Graph() && !files[j].Graph() })
	opened := maps.Clone(dirs)
	defer func() {
		for _, d := range opened {
			d.Close()
		}
	}()
	for _, f := range files {
		d, ok := opened[f.Dir]
		if !ok {
			var err error
			if d, err = safeio.OpenPrivateDir(f.Dir); err != nil {
				return fmt.Errorf("%s: %s: %w", f.Place, f.Dir, err)
			}
			if opened == nil {
				opened = map[string]*safeio.Dir{}
			}
			opened[f.Dir] = d
		}
		var write func(io.Writer) error
		if f.Graph() {
			opts, out := flame.Options{Title: f.Title, Subtitle: r.Show.Subtitle}, flame.Output(f.Format)
			write = func(w io.Writer) error { return flame.Write(w, f.Stacks, out, opts) }
		} else {
			write = func(w io.Writer) error { return Render(w, r, f.Format) }
		}
		path := filepath.Join(f.Dir, f.Name)
		if err := d.WriteFile(context.Background(), f.Name, 0o644, write); err != nil {
			return fmt.Errorf("%s: write %s: %w", f.Place, path, err)
		}
		r.Artifacts = append(r.Artifacts, Artifact{Kind: artifactKinds[f.Format], Path: path})
	}
	return nil
}
