package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// A report holding +Inf (a ratio over zero) still prints, instead of
// encoding/json refusing the whole document.
func TestWriteJSONNonFiniteNumbers(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	type row struct {
		Ratio    float64            `json:"ratio"`
		Optional *float64           `json:"optional"`
		ByKey    map[string]float64 `json:"by_key"`
		hidden   float64
	}
	r := New("test", "dev", time.Now())
	original := []row{{Ratio: inf, Optional: &nan, ByKey: map[string]float64{"a": math.Inf(-1), "b": 2}, hidden: inf}}
	r.Data = original
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var back struct {
		Data []struct {
			Ratio    float64            `json:"ratio"`
			Optional *float64           `json:"optional"`
			ByKey    map[string]float64 `json:"by_key"`
		} `json:"data"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	d := back.Data[0]
	if d.Ratio != math.MaxFloat64 || d.Optional != nil || d.ByKey["a"] != -math.MaxFloat64 || d.ByKey["b"] != 2 {
		t.Errorf("decoded %+v", d)
	}
	if !math.IsInf(original[0].Ratio, 1) || !math.IsNaN(*original[0].Optional) {
		t.Error("WriteJSON modified the report it was given")
	}
	if !strings.Contains(buf.String(), `"schema": "`+Schema+`"`) {
		t.Errorf("envelope lost: %s", buf.String())
	}
}
