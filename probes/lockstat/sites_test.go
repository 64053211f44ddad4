package lockstat

import (
	"testing"
	"time"
)

func TestSiteWaitsScaleSampledSitesToEveryContention(t *testing.T) {
	us := time.Microsecond
	s := Snapshot{StackEvery: 8, Sites: map[SiteKey]WaitStats{
		// Spinlocks: 3 + 1 sampled of 32, 40 µs sampled of 400 µs.
		{StackID: 1, Flags: FlagSpin}:         {Count: 3, Total: 30 * us, Max: 20 * us},
		{StackID: 2, Flags: FlagSpin}:         {Count: 1, Total: 10 * us, Max: 10 * us},
		{StackID: Unsampled, Flags: FlagSpin}: {Count: 28, Total: 360 * us, Max: 50 * us},
		// Mutexes: none sampled.
		{StackID: Unsampled, Flags: FlagMutex}: {Count: 5, Total: 7 * us, Max: 3 * us},
		// rwsem writers: sampled, one without a stack, none unsampled.
		{StackID: NoStack, Flags: FlagWrite | FlagRT}: {Count: 2, Total: 4 * us, Max: 3 * us},
	}}
	got := s.SiteWaits()
	want := map[SiteKey]SiteWait{
		{StackID: 1, Flags: FlagSpin}: {Sampled: WaitStats{Count: 3, Total: 30 * us, Max: 20 * us},
			Estimated: WaitStats{Count: 24, Total: 300 * us, Max: 20 * us}},
		{StackID: 2, Flags: FlagSpin}: {Sampled: WaitStats{Count: 1, Total: 10 * us, Max: 10 * us},
			Estimated: WaitStats{Count: 8, Total: 100 * us, Max: 10 * us}},
		{StackID: Unsampled, Flags: FlagMutex}: {Estimated: WaitStats{Count: 5, Total: 7 * us, Max: 3 * us}},
		{StackID: NoStack, Flags: FlagWrite | FlagRT}: {Sampled: WaitStats{Count: 2, Total: 4 * us, Max: 3 * us},
			Estimated: WaitStats{Count: 2, Total: 4 * us, Max: 3 * us}},
	}
	if len(got) != len(want) {
		t.Errorf("got %d sites, want %d: %+v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("site %+v = %+v, want %+v", k, got[k], w)
		}
	}
}

// Sampled waits can all round to 0 ns while unsampled ones do not: the
// kind's wait is then split by count, so it is not lost.
func TestSiteWaitsSplitWaitByCountWhenSampledWaitIsZero(t *testing.T) {
	s := Snapshot{StackEvery: 4, Sites: map[SiteKey]WaitStats{
		{StackID: 1, Flags: FlagSpin}:         {Count: 1},
		{StackID: 2, Flags: FlagSpin}:         {Count: 3},
		{StackID: Unsampled, Flags: FlagSpin}: {Count: 12, Total: 800},
	}}
	got := s.SiteWaits()
	if a, b := got[SiteKey{1, FlagSpin}].Estimated, got[SiteKey{2, FlagSpin}].Estimated; a.Count != 4 || b.Count != 12 || a.Total != 200 || b.Total != 600 {
		t.Errorf("estimates %+v and %+v, want 4 waits/200 ns and 12 waits/600 ns", a, b)
	}
}
