package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
)

// The budget line judges programs and process together, and the period
// is called stretched only when it was: a period read a little late is
// not.
func TestOverheadBudgetLines(t *testing.T) {
	ov := &evidence.Overhead{
		CPUCost: &evidence.CPUCost{MaxShare: 0.013},
		Budget: &evidence.BudgetUse{CPUShare: 0.02, ProcessShare: 0.005, TotalShare: 0.024,
			PeriodNs: int64(time.Second), MaxPeriodNs: int64(time.Second + time.Millisecond), SwitchNs: 3e6},
	}
	var b bytes.Buffer
	writeOverhead(&b, ov)
	out := b.String()
	if !strings.Contains(out, "— kept (1.8%: programs 1.3%") || strings.Contains(out, "stretched") ||
		!strings.Contains(out, "windows every 1.00s; attaching and detaching them took the process 3.00ms") {
		t.Errorf("unstretched, kept:\n%s", out)
	}
	ov.Budget.ProcessShare, ov.Budget.MaxPeriodNs = 0.008, int64(2*time.Second)
	b.Reset()
	writeOverhead(&b, ov)
	if out := b.String(); !strings.Contains(out, "— exceeded (2.1%") || !strings.Contains(out, "stretched up to 2.00s") {
		t.Errorf("stretched, exceeded:\n%s", out)
	}
}
