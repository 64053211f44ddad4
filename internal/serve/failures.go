package serve

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Retrying failed windows: the first retry after retryFirst, each next
// one twice as late, never later than retryMax. A window that fails at
// once (an attach refused) must not turn into a loop printing the same
// error as fast as it fails.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
	// maxDistinct bounds the distinct messages remembered per streak of
	// failures (and per HTTP server error); the rest are counted as one.
	maxDistinct = 16
)

// windowFailures spaces out the retries of failing windows and says what
// failed: each distinct error once per streak of failures, the streak's
// length when it reaches 10, 100, 1000…, and the counts per error when
// windows complete again.
type windowFailures struct {
	w   io.Writer
	now func() time.Time

	streak int
	since  time.Time
	counts map[string]int
	order  []string // distinct errors, first seen first
	other  int      // failures past maxDistinct distinct errors
}

func newWindowFailures(w io.Writer) *windowFailures {
	return &windowFailures{w: w, now: time.Now}
}

// retryDelay is how long to wait after the n-th failure in a row.
func retryDelay(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// failed records a failed window and returns how long to wait before
// the next.
func (f *windowFailures) failed(err error) time.Duration {
	f.streak++
	delay := retryDelay(f.streak)
	msg := err.Error()
	if f.streak == 1 {
		f.since, f.counts, f.order, f.other = f.now(), map[string]int{}, nil, 0
	}
	switch _, seen := f.counts[msg]; {
	case seen:
		f.counts[msg]++
	case len(f.counts) >= maxDistinct:
		f.other++
	default:
		f.counts[msg] = 1
		f.order = append(f.order, msg)
		if f.streak == 1 {
			f.printf("window failed: %s; retrying in %v, then twice as late after each failure up to %v (repeats are counted, not printed)", msg, delay, retryMax)
		} else {
			f.printf("window failed: %s (%d failures in a row; retrying in %v)", msg, f.streak, delay)
		}
		return delay
	}
	if isPowerOf10(uint64(f.streak)) {
		f.printf("%d windows in a row failed since %s (retrying in %v)", f.streak, f.since.Format(time.TimeOnly), delay)
	}
	return delay
}

// completed records a window that completed; after failures it says how
// many there were, per error.
func (f *windowFailures) completed() {
	if f.streak == 0 {
		return
	}
	var parts []string
	order := append([]string(nil), f.order...)
	sort.SliceStable(order, func(i, j int) bool { return f.counts[order[i]] > f.counts[order[j]] })
	for _, msg := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", f.counts[msg], msg))
	}
	if f.other > 0 {
		parts = append(parts, fmt.Sprintf("%d× other errors", f.other))
	}
	f.printf("windows complete again after %d failed in a row over %v: %s", f.streak, f.now().Sub(f.since).Round(time.Second), strings.Join(parts, "; "))
	f.streak = 0
	f.counts, f.order = nil, nil
}

func (f *windowFailures) printf(format string, args ...any) {
	if f.w != nil {
		fmt.Fprintf(f.w, "perfscope serve: "+format+"\n", args...)
	}
}

// isPowerOf10 says whether n is 10, 100, 1000…
func isPowerOf10(n uint64) bool {
	if n < 10 {
		return false
	}
	for n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// sleep waits d unless ctx ends first; false when it did.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// httpErrors is the HTTP server's error log: each distinct error once,
// then its count at 10, 100, 1000… repeats. The server logs every failed
// accept and handshake, and a flood makes many.
type httpErrors struct {
	w io.Writer

	mu     sync.Mutex
	counts map[string]uint64
	other  uint64
}

func (h *httpErrors) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	// "http: Accept error: …; retrying in 5ms": the delay grows, the
	// error is the same.
	key, _, _ := strings.Cut(line, "; retrying in ")
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = map[string]uint64{}
	}
	n, seen := h.counts[key]
	switch {
	case seen || len(h.counts) < maxDistinct:
		n++
		h.counts[key] = n
		if n == 1 {
			fmt.Fprintf(h.w, "perfscope serve: %s (repeats are counted, not printed)\n", key)
		}
	default:
		h.other++
		key, n = "other HTTP server errors", h.other
		if n == 1 {
			fmt.Fprintf(h.w, "perfscope serve: %s (%d distinct HTTP server errors seen: more are counted together, not printed)\n", line, maxDistinct)
		}
	}
	if isPowerOf10(n) {
		fmt.Fprintf(h.w, "perfscope serve: %d times: %s\n", n, key)
	}
	return len(p), nil
}
