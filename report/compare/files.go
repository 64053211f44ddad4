package compare

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/perfscope/perfscope/report"
)

// Files is `perfscope udp --compare` (and tcp's): the report comparing
// two saved -o json runs of command, paths. An error is ctx's when it ended,
// else one sentence about the files, the user's to correct.
func Files(ctx context.Context, command, version string, started time.Time, paths [2]string) (*report.Report, error) {
	var runs [2]Run
	for i, path := range paths {
		var err error
		if runs[i], err = Load(ctx, path); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("--compare %s: no such file: give the -o json output of two perfscope %s runs", path, command)
			}
			return nil, err
		}
		if runs[i].Command != command {
			return nil, fmt.Errorf("--compare %s is a perfscope %s run: compare it with perfscope %s --compare", path, runs[i].Command, runs[i].Command)
		}
	}
	r := report.New(command+" compare", version, started)
	c := Compare(runs[0], runs[1])
	r.Data = c
	r.Meta.DurationNs = c.After.DurationNs
	return r, nil
}
