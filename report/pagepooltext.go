package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
)

// writePagePools prints the interface's page pools (one line each: pages
// in flight and the counters over the window that moved) and what the
// kernel could not say about them.
func writePagePools(w io.Writer, q evidence.QueueSection) {
	for _, p := range q.PagePools {
		line := fmt.Sprintf("page pool %d", p.ID)
		if p.NAPIID != 0 {
			line += fmt.Sprintf(" (NAPI %d)", p.NAPIID)
		}
		if p.Detached {
			line += " detached"
		}
		if p.Inflight != nil {
			line += fmt.Sprintf(": %d pages in flight", *p.Inflight)
		}
		var moved []string
		for k, v := range p.Counters {
			if v > 0 {
				moved = append(moved, fmt.Sprintf("%s %d", k, v))
			}
		}
		sort.Strings(moved)
		switch {
		case p.Counters == nil:
		case len(moved) == 0:
			line += "; no allocation or recycling over the window"
		default:
			line += "; over the window " + strings.Join(moved, ", ")
		}
		fmt.Fprintln(w, line)
	}
	if q.PagePoolUnavailable != "" {
		fmt.Fprintf(w, "page_pool_unavailable: %s\n", q.PagePoolUnavailable)
	}
}
