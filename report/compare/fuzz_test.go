package compare

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/perfscope/perfscope/report"
)

// FuzzDecode: any bytes either decode to exactly one udp report, which
// compares with itself, or fail with ErrNotUDPReport; never a panic.
//
//	go test ./report/compare -run '^$' -fuzz '^FuzzDecode$' -fuzztime 60s
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"testdata/before.json", "testdata/after.json", "testdata/tcp-before.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"schema":"perfscope/v2","command":"udp","data":{}}`))
	f.Add([]byte(`{"schema":"perfscope/v2","command":"udp","data":{}} {}`))
	f.Add([]byte(`{"schema":"perfscope/v1","command":"udp","data":{"softirq":{"cpus":[{"cpu":-1}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := Decode(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrNotUDPReport) {
				t.Fatalf("error %v is not ErrNotUDPReport", err)
			}
			return
		}
		c := Compare(run, run)
		WriteText(new(bytes.Buffer), c)
		if err := report.WriteJSON(new(bytes.Buffer), c); err != nil {
			t.Fatalf("comparison does not encode: %v", err)
		}
	})
}
