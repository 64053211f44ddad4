package diagnose

import (
	"encoding/json"
	"testing"
)

func TestRunRanksByImpactThenSeverity(t *testing.T) {
	rules := []Rule[int]{
		{ID: "a.low", Check: func(int) *Finding { return &Finding{Severity: Crit, Impact: 0.1} }},
		{ID: "b.silent", Check: func(int) *Finding { return nil }},
		{ID: "c.high", Check: func(int) *Finding { return &Finding{Severity: Info, Impact: 0.5} }},
		{ID: "d.tie", Check: func(int) *Finding { return &Finding{Severity: Warn, Impact: 0.1} }},
	}
	got := Run(rules, 0)
	want := []string{"c.high", "a.low", "d.tie"}
	if len(got) != len(want) {
		t.Fatalf("got %d findings, want %d", len(got), len(want))
	}
	for i, id := range want {
		if got[i].ID != id {
			t.Errorf("rank %d = %s, want %s", i, got[i].ID, id)
		}
	}
	if Worst(got) != Crit {
		t.Errorf("worst = %v", Worst(got))
	}
}

func TestSeverityJSON(t *testing.T) {
	b, err := json.Marshal(Finding{ID: "x", Severity: Warn})
	if err != nil {
		t.Fatal(err)
	}
	var f Finding
	if err := json.Unmarshal(b, &f); err != nil || f.Severity != Warn {
		t.Fatalf("round trip: %s → %+v, %v", b, f, err)
	}
	if _, err := ParseSeverity("bogus"); err == nil {
		t.Error("bogus severity accepted")
	}
}
