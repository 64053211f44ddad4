package measure

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/collectors/netlinkq"
)

func u64p(v uint64) *uint64 { return &v }

// The page pools over the window: counters are the growth between the two
// readings (a pool created meanwhile counts from zero); a kernel without
// CONFIG_PAGE_POOL_STATS lists the pools without counters and says why;
// a driver without page_pool says so too.
func TestPagePoolDelta(t *testing.T) {
	pools := []netlinkq.PagePool{{ID: 3, Ifindex: 4, NAPIID: 8193, Inflight: u64p(12)}, {ID: 5, Ifindex: 4, NAPIID: 8194, Inflight: u64p(0)}}
	first := pagePoolReading{pools: pools[:1], stats: []netlinkq.PagePoolStats{{ID: 3, Counters: map[string]uint64{"alloc-fast": 100, "alloc-slow": 4}}}}
	last := pagePoolReading{pools: pools, stats: []netlinkq.PagePoolStats{
		{ID: 3, Counters: map[string]uint64{"alloc-fast": 1100, "alloc-slow": 9}},
		{ID: 5, Counters: map[string]uint64{"alloc-fast": 7}},
	}}
	got, why := PagePoolDelta("eth0", first, last)
	if why != "" || len(got) != 2 {
		t.Fatalf("pools %+v, unavailable %q", got, why)
	}
	if got[0].ID != 3 || got[0].NAPIID != 8193 || *got[0].Inflight != 12 || got[0].Counters["alloc-fast"] != 1000 || got[0].Counters["alloc-slow"] != 5 {
		t.Errorf("pool 3 %+v", got[0])
	}
	if got[1].Counters["alloc-fast"] != 7 {
		t.Errorf("a pool created in the window: %+v", got[1])
	}

	noStats := fmt.Errorf("%w: %w", netlinkq.ErrNoPagePoolStats, netlinkq.ErrUnavailable)
	got, why = PagePoolDelta("eth0", pagePoolReading{pools: pools, statsErr: noStats}, pagePoolReading{pools: pools, statsErr: noStats})
	if len(got) != 2 || got[0].Counters != nil || !strings.Contains(why, "built without CONFIG_PAGE_POOL_STATS") {
		t.Errorf("without CONFIG_PAGE_POOL_STATS: pools %+v, unavailable %q", got, why)
	}
	got, why = PagePoolDelta("lo", pagePoolReading{statsErr: noStats}, pagePoolReading{statsErr: noStats})
	if len(got) != 0 || !strings.Contains(why, "CONFIG_PAGE_POOL_STATS") || !strings.Contains(why, "lo's driver uses no page_pool") {
		t.Errorf("lo: %q", why)
	}
	_, why = PagePoolDelta("eth0", pagePoolReading{poolsErr: fmt.Errorf("no page-pool-get: %w", netlinkq.ErrUnavailable)}, pagePoolReading{})
	if !strings.Contains(why, "no page-pool-get") {
		t.Errorf("old kernel: %q", why)
	}
}
