package netlinkq

import (
	"errors"
	"fmt"
	"sort"
)

// The page_pool commands and attributes of include/uapi/linux/netdev.h
// (Documentation/netlink/specs/netdev.yaml: page-pool-get, Linux 6.8+,
// CONFIG_PAGE_POOL; page-pool-stats-get, CONFIG_PAGE_POOL_STATS).
const (
	cmdPagePoolGet      = 5 // NETDEV_CMD_PAGE_POOL_GET
	cmdPagePoolStatsGet = 9 // NETDEV_CMD_PAGE_POOL_STATS_GET

	attrPagePoolID          = 1 // NETDEV_A_PAGE_POOL_ID (uint)
	attrPagePoolIfindex     = 2 // NETDEV_A_PAGE_POOL_IFINDEX (u32; absent for loopback's and detached pools)
	attrPagePoolNAPIID      = 3 // NETDEV_A_PAGE_POOL_NAPI_ID (u32)
	attrPagePoolInflight    = 4 // NETDEV_A_PAGE_POOL_INFLIGHT (uint, pages)
	attrPagePoolInflightMem = 5 // NETDEV_A_PAGE_POOL_INFLIGHT_MEM (uint, bytes)
	attrPagePoolDetachTime  = 6 // NETDEV_A_PAGE_POOL_DETACH_TIME (uint, seconds since boot)

	attrPagePoolStatsInfo = 1 // NETDEV_A_PAGE_POOL_STATS_INFO: nested id and ifindex
)

// pagePoolStatNames are the counters of a page-pool-stats-get reply by
// attribute (NETDEV_A_PAGE_POOL_STATS_ALLOC_FAST = 8 …), named as the
// netlink spec and `ynl --dump page-pool-stats-get` name them.
var pagePoolStatNames = map[uint16]string{
	8: "alloc-fast", 9: "alloc-slow", 10: "alloc-slow-high-order", 11: "alloc-empty",
	12: "alloc-refill", 13: "alloc-waive", 14: "recycle-cached", 15: "recycle-cache-full",
	16: "recycle-ring", 17: "recycle-ring-full", 18: "recycle-released-refcnt",
}

// ErrNoPagePoolStats means the kernel's netdev family has no
// page-pool-stats-get: it was built without CONFIG_PAGE_POOL_STATS (the
// command is compiled in only with it), or is older than Linux 6.8.
var ErrNoPagePoolStats = errors.New("the kernel's netdev netlink family has no page-pool-stats-get: built without CONFIG_PAGE_POOL_STATS (or older than Linux 6.8)")

// PagePool is one page_pool: the pages a driver's RX queue allocates
// from and recycles to.
type PagePool struct {
	ID uint64 `json:"id"`
	// Ifindex is the device's; 0 when the kernel leaves it out (a pool
	// of the loopback device, or one whose device is gone).
	Ifindex int `json:"ifindex"`
	// NAPIID is the NAPI instance the pool feeds; 0 when not reported.
	NAPIID uint32 `json:"napi_id"`
	// Inflight and InflightMem are the pages (and their bytes) handed
	// out and not yet returned; nil where not reported.
	Inflight    *uint64 `json:"inflight"`
	InflightMem *uint64 `json:"inflight_mem"`
	// DetachTime is when the pool's device let go of it (seconds since
	// boot): a pool waiting for its in-flight pages; nil while attached.
	DetachTime *uint64 `json:"detach_time,omitempty"`
}

// PagePoolStats are one pool's allocation and recycling counters since it
// was created, by the kernel's names ("alloc-fast", "alloc-slow",
// "recycle-ring-full", …).
type PagePoolStats struct {
	ID       uint64            `json:"id"`
	Ifindex  int               `json:"ifindex"`
	Counters map[string]uint64 `json:"counters"`
}

// PagePools lists the page pools of ifindex (every device's when 0) in
// the caller's network namespace; ErrUnavailable where the family has no
// page-pool-get (before 6.8, or a kernel without CONFIG_PAGE_POOL).
func PagePools(ifindex int) ([]PagePool, error) {
	msgs, err := dumpBody(cmdPagePoolGet, nil)
	if err != nil {
		return nil, err
	}
	ps, err := parsePagePools(msgs)
	if err != nil {
		return nil, err
	}
	return filterIfindex(ps, ifindex, func(p PagePool) int { return p.Ifindex }), nil
}

// PagePoolStatsOf lists the page pools' counters of ifindex (every
// device's when 0); ErrNoPagePoolStats (which wraps ErrUnavailable) where
// the kernel cannot report them.
func PagePoolStatsOf(ifindex int) ([]PagePoolStats, error) {
	msgs, err := dumpBody(cmdPagePoolStatsGet, nil)
	if errors.Is(err, ErrUnavailable) {
		return nil, fmt.Errorf("%w: %w", ErrNoPagePoolStats, err)
	}
	if err != nil {
		return nil, err
	}
	ps, err := parsePagePoolStats(msgs)
	if err != nil {
		return nil, err
	}
	return filterIfindex(ps, ifindex, func(p PagePoolStats) int { return p.Ifindex }), nil
}

// parsePagePools reads the payloads of a NETDEV_CMD_PAGE_POOL_GET dump.
func parsePagePools(payloads [][]byte) ([]PagePool, error) {
	var out []PagePool
	for i, p := range payloads {
		if len(p) < genlHeaderLen {
			return nil, fmt.Errorf("page-pool message %d: %d bytes, shorter than the genl header", i, len(p))
		}
		a, err := parseAttrs(p[genlHeaderLen:])
		if err != nil {
			return nil, fmt.Errorf("page-pool message %d: %w", i, err)
		}
		id, ok := a.uint(attrPagePoolID)
		if !ok {
			return nil, fmt.Errorf("page-pool message %d has no id", i)
		}
		pp := PagePool{ID: id}
		if v, ok := a.u32(attrPagePoolIfindex); ok {
			pp.Ifindex = int(v)
		}
		if v, ok := a.u32(attrPagePoolNAPIID); ok {
			pp.NAPIID = v
		}
		pp.Inflight, pp.InflightMem, pp.DetachTime = optUint(a, attrPagePoolInflight), optUint(a, attrPagePoolInflightMem), optUint(a, attrPagePoolDetachTime)
		out = append(out, pp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// parsePagePoolStats reads the payloads of a
// NETDEV_CMD_PAGE_POOL_STATS_GET dump: each pool's id and ifindex nested
// in its info attribute, then its counters.
func parsePagePoolStats(payloads [][]byte) ([]PagePoolStats, error) {
	var out []PagePoolStats
	for i, p := range payloads {
		if len(p) < genlHeaderLen {
			return nil, fmt.Errorf("page-pool-stats message %d: %d bytes, shorter than the genl header", i, len(p))
		}
		a, err := parseAttrs(p[genlHeaderLen:])
		if err != nil {
			return nil, fmt.Errorf("page-pool-stats message %d: %w", i, err)
		}
		info, err := parseAttrs(a[attrPagePoolStatsInfo])
		if err != nil {
			return nil, fmt.Errorf("page-pool-stats message %d info: %w", i, err)
		}
		id, ok := info.uint(attrPagePoolID)
		if !ok {
			return nil, fmt.Errorf("page-pool-stats message %d has no pool id", i)
		}
		s := PagePoolStats{ID: id, Counters: map[string]uint64{}}
		if v, ok := info.u32(attrPagePoolIfindex); ok {
			s.Ifindex = int(v)
		}
		for t, name := range pagePoolStatNames {
			if v, ok := a.uint(t); ok {
				s.Counters[name] = v
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func optUint(a attrs, t uint16) *uint64 {
	v, ok := a.uint(t)
	if !ok {
		return nil
	}
	return &v
}
