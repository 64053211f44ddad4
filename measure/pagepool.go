package measure

import (
	"errors"
	"fmt"
	"strings"

	"github.com/perfscope/perfscope/collectors/netlinkq"
	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/probes"
)

// PagePooler reads the page pools of a device and their statistics
// (page-pool-get, page-pool-stats-get); a Netlink without it reports
// none.
type PagePooler interface {
	PagePools(ifindex int) ([]netlinkq.PagePool, error)
	PagePoolStats(ifindex int) ([]netlinkq.PagePoolStats, error)
}

func (liveNetlink) PagePools(ifindex int) ([]netlinkq.PagePool, error) {
	return netlinkq.PagePools(ifindex)
}

func (liveNetlink) PagePoolStats(ifindex int) ([]netlinkq.PagePoolStats, error) {
	return netlinkq.PagePoolStatsOf(ifindex)
}

// pagePoolReading is the interface's page pools and their counters at one
// end of the window.
type pagePoolReading struct {
	pools    []netlinkq.PagePool
	poolsErr error
	stats    []netlinkq.PagePoolStats
	statsErr error
}

// readPagePools reads the interface's page pools and their counters.
func (c *NetCounters) readPagePools() pagePoolReading {
	var r pagePoolReading
	p, ok := c.src.Netlink.(PagePooler)
	switch {
	case c.opts.Iface == "" || c.opts.Ifindex <= 0:
		r.poolsErr = errors.New("no interface index")
	case !ok:
		r.poolsErr = fmt.Errorf("netdev netlink page-pool-get: %w", probes.ErrNotSupported)
	default:
		r.pools, r.poolsErr = p.PagePools(c.opts.Ifindex)
		r.stats, r.statsErr = p.PagePoolStats(c.opts.Ifindex)
	}
	if r.poolsErr != nil && r.statsErr == nil {
		r.statsErr = r.poolsErr
	}
	return r
}

// PagePoolDelta is the interface's page pools at the end of the window
// with each pool's allocation and recycling counters over it, and why
// there are no counters (or no pools) in plain words: a kernel built
// without CONFIG_PAGE_POOL_STATS says so, as does a driver that uses no
// page_pool.
func PagePoolDelta(iface string, first, last pagePoolReading) ([]evidence.PagePool, string) {
	var why []string
	switch {
	case errors.Is(first.poolsErr, probes.ErrNotSupported):
		return nil, "page pools are not read in this run"
	case errors.Is(first.poolsErr, netlinkq.ErrUnavailable):
		return nil, "this kernel's netdev netlink family has no page-pool-get (Linux 6.8+ with CONFIG_PAGE_POOL)"
	case first.poolsErr != nil:
		return nil, fmt.Sprintf("page-pool-get: %v", first.poolsErr)
	case last.poolsErr != nil:
		return nil, fmt.Sprintf("page-pool-get at the end of the window: %v", last.poolsErr)
	}
	counted := first.statsErr == nil && last.statsErr == nil
	switch {
	case errors.Is(first.statsErr, netlinkq.ErrNoPagePoolStats):
		why = append(why, "no allocation or recycling counters: this kernel was built without CONFIG_PAGE_POOL_STATS (its netdev netlink family has no page-pool-stats-get)")
	case first.statsErr != nil:
		why = append(why, fmt.Sprintf("page-pool-stats-get: %v", first.statsErr))
	case last.statsErr != nil:
		why = append(why, fmt.Sprintf("page-pool-stats-get at the end of the window: %v", last.statsErr))
	}
	if len(last.pools) == 0 {
		why = append(why, fmt.Sprintf("%s's driver uses no page_pool (page-pool-get lists none for it)", iface))
	}
	before, after := map[uint64]map[string]uint64{}, map[uint64]map[string]uint64{}
	if counted {
		for _, s := range first.stats {
			before[s.ID] = s.Counters
		}
		for _, s := range last.stats {
			after[s.ID] = s.Counters
		}
	}
	var out []evidence.PagePool
	for _, p := range last.pools {
		row := evidence.PagePool{ID: p.ID, NAPIID: p.NAPIID, Inflight: p.Inflight, InflightMem: p.InflightMem, Detached: p.DetachTime != nil}
		// A pool created during the window counts from its creation.
		if now, ok := after[p.ID]; ok {
			row.Counters = map[string]uint64{}
			for k, v := range now {
				if b := before[p.ID][k]; v >= b {
					row.Counters[k] = v - b
				}
			}
		}
		out = append(out, row)
	}
	return out, strings.Join(why, "; ")
}
