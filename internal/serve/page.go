package serve

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"

	"github.com/perfscope/perfscope/report"
)

// latestPage is the HTML page of the latest window, drawn when first
// asked for (not every window: most are never looked at) and kept until
// the next window replaces the report. Requests draw one at a time.
type latestPage struct {
	mu   sync.Mutex
	rep  *report.Report
	page []byte
}

func (p *latestPage) set(r *report.Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rep, p.page = r, nil
}

func (p *latestPage) get() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rep == nil {
		return nil, nil
	}
	if p.page == nil {
		var b bytes.Buffer
		if err := report.Render(&b, p.rep, report.HTML); err != nil {
			return nil, fmt.Errorf("draw the latest window's page: %w", err)
		}
		p.page = b.Bytes()
	}
	return p.page, nil
}

// serveReport answers GET /report with the latest window's page: the
// report `perfscope recipe run -o html` writes, for the last interval.
func (s *Server) serveReport(w http.ResponseWriter, _ *http.Request) {
	page, err := s.page.get()
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	case page == nil:
		http.Error(w, "no window completed yet", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.Write(page)
}
