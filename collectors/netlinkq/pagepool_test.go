package netlinkq

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/internal/testutil"
)

// uintAttr encodes a netlink "uint" as the kernel's nla_put_uint does: 4
// bytes when the value fits, else 8.
func uintAttr(t uint16, v uint64) []byte {
	if v <= 1<<32-1 {
		return u32Attr(t, uint32(v))
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return attr(t, b[:])
}

// genl is a reply payload: the generic-netlink header (cmd, version 1)
// and the attributes.
func genl(cmd uint8, attrs ...[]byte) []byte {
	b := []byte{cmd, 1, 0, 0}
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

// Replies built per Documentation/netlink/specs/netdev.yaml: two pools of
// ifindex 4 (one with an inflight count over 4 GiB, sent in 8 bytes), one
// of the loopback device (no ifindex), one detached.
func TestParsePagePools(t *testing.T) {
	msgs := [][]byte{
		genl(cmdPagePoolGet, uintAttr(attrPagePoolID, 7), u32Attr(attrPagePoolIfindex, 4), u32Attr(attrPagePoolNAPIID, 8193),
			uintAttr(attrPagePoolInflight, 12), uintAttr(attrPagePoolInflightMem, 49152)),
		genl(cmdPagePoolGet, uintAttr(attrPagePoolID, 3), u32Attr(attrPagePoolIfindex, 4), u32Attr(attrPagePoolNAPIID, 8194),
			uintAttr(attrPagePoolInflight, 0), uintAttr(attrPagePoolInflightMem, 5<<32)),
		genl(cmdPagePoolGet, uintAttr(attrPagePoolID, 1), uintAttr(attrPagePoolInflight, 0)),
		genl(cmdPagePoolGet, uintAttr(attrPagePoolID, 9), u32Attr(attrPagePoolIfindex, 4), uintAttr(attrPagePoolDetachTime, 1234)),
	}
	ps, err := parsePagePools(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 || ps[0].ID != 1 || ps[0].Ifindex != 0 || ps[1].ID != 3 || ps[2].ID != 7 {
		t.Fatalf("pools %+v", ps)
	}
	p := ps[2]
	if p.Ifindex != 4 || p.NAPIID != 8193 || p.Inflight == nil || *p.Inflight != 12 || p.InflightMem == nil || *p.InflightMem != 49152 || p.DetachTime != nil {
		t.Errorf("pool 7 %+v", p)
	}
	if ps[1].InflightMem == nil || *ps[1].InflightMem != 5<<32 {
		t.Errorf("an 8-byte uint: %+v", ps[1])
	}
	if ps[3].DetachTime == nil || *ps[3].DetachTime != 1234 || ps[3].Inflight != nil {
		t.Errorf("detached pool %+v", ps[3])
	}
	if got := filterIfindex(ps, 4, func(p PagePool) int { return p.Ifindex }); len(got) != 3 {
		t.Errorf("ifindex 4's pools %+v", got)
	}
	if _, err := parsePagePools([][]byte{genl(cmdPagePoolGet, u32Attr(attrPagePoolNAPIID, 1))}); err == nil {
		t.Error("a pool without an id parsed")
	}
	if _, err := parsePagePools([][]byte{{5, 1}}); err == nil {
		t.Error("a message shorter than the genl header parsed")
	}
}

func TestParsePagePoolStats(t *testing.T) {
	info := func(id uint64, ifindex uint32) []byte {
		body := uintAttr(attrPagePoolID, id)
		if ifindex != 0 {
			body = append(body, u32Attr(attrPagePoolIfindex, ifindex)...)
		}
		return attr(attrPagePoolStatsInfo|unix.NLA_F_NESTED, body)
	}
	var counters [][]byte
	for a := uint16(8); a <= 18; a++ {
		counters = append(counters, uintAttr(a, uint64(a)*100))
	}
	msgs := [][]byte{
		genl(cmdPagePoolStatsGet, append([][]byte{info(7, 4)}, counters...)...),
		// A kernel that sends fewer counters: only those are present.
		genl(cmdPagePoolStatsGet, info(2, 0), uintAttr(8, 1<<40)),
	}
	ps, err := parsePagePoolStats(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].ID != 2 || ps[0].Ifindex != 0 || len(ps[0].Counters) != 1 || ps[0].Counters["alloc-fast"] != 1<<40 {
		t.Fatalf("stats %+v", ps)
	}
	s := ps[1]
	if s.ID != 7 || s.Ifindex != 4 || len(s.Counters) != 11 || s.Counters["alloc-fast"] != 800 || s.Counters["alloc-slow"] != 900 ||
		s.Counters["recycle-ring-full"] != 1700 || s.Counters["recycle-released-refcnt"] != 1800 {
		t.Errorf("pool 7 %+v", s)
	}
	if _, err := parsePagePoolStats([][]byte{genl(cmdPagePoolStatsGet, uintAttr(8, 1))}); err == nil {
		t.Error("stats without the pool's info parsed")
	}
}

// kernelConfig is the running kernel's configuration (/proc/config.gz, else
// /boot/config-RELEASE); "" when neither is readable.
func kernelConfig(t *testing.T) string {
	t.Helper()
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			if b, err := io.ReadAll(z); err == nil {
				return string(b)
			}
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		if b, err := os.ReadFile("/boot/config-" + unix.ByteSliceToString(u.Release[:])); err == nil {
			return string(b)
		}
	}
	return ""
}

// The live kernel answers page-pool-get, and page-pool-stats-get exactly
// when its configuration has CONFIG_PAGE_POOL_STATS: without it the
// error says so (ErrNoPagePoolStats), never an empty list.
func TestLivePagePoolStatsFollowTheConfig(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := kernelConfig(t)
	if !strings.Contains(cfg, "CONFIG_PAGE_POOL=y") {
		t.Skip("the kernel's configuration is not readable or has no CONFIG_PAGE_POOL")
	}
	pools, err := PagePools(0)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("no page-pool-get (before Linux 6.8): %v", err)
		}
		t.Fatalf("page-pool-get: %v", err)
	}
	t.Logf("page pools: %+v", pools)
	_, err = PagePoolStatsOf(0)
	switch {
	case strings.Contains(cfg, "# CONFIG_PAGE_POOL_STATS is not set"):
		if !errors.Is(err, ErrNoPagePoolStats) || !errors.Is(err, ErrUnavailable) {
			t.Errorf("a kernel without CONFIG_PAGE_POOL_STATS: page-pool-stats-get error %v, want ErrNoPagePoolStats", err)
		}
	case strings.Contains(cfg, "CONFIG_PAGE_POOL_STATS=y") && err != nil:
		t.Errorf("a kernel with CONFIG_PAGE_POOL_STATS: %v", err)
	}
}
