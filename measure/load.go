package measure

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/diagnose"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/offcpu"
)

// RunLoad is `perfscope load`'s run: o's stepped load over the service —
// o.PIDs, else the local processes listening on the URL's port — with
// its knee and the load rules' findings. A URL no local process serves,
// and a service that never answered, are bad input.
func RunLoad(ctx context.Context, o offcpu.LoadOptions) (*evidence.Load, []diagnose.Finding, error) {
	if len(o.PIDs) == 0 {
		pids, err := offcpu.ServiceOf(o.Spec.URL, sockets.NewFS("/"))
		if err != nil {
			if errors.Is(err, offcpu.ErrNotLocal) || errors.Is(err, offcpu.ErrNoListener) {
				return nil, nil, BadInput("--url %s: %v: pass the service's --pid", o.Spec.URL, err)
			}
			return nil, nil, fmt.Errorf("find the service behind %s: %w (pass its --pid)", o.Spec.URL, err)
		}
		o.PIDs, o.PIDFrom = pids, "port"
	}
	ev, err := offcpu.MeasureLoad(ctx, o)
	if errors.Is(err, offcpu.ErrNoAnswer) {
		return nil, nil, MarkBadInput(err)
	}
	if err != nil {
		return nil, nil, err
	}
	ev.Knee = diagnose.LoadKnee(*ev, nil)
	return ev, diagnose.Run(diagnose.LoadRules, *ev), nil
}
