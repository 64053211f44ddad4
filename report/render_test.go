package report

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/flame"
)

// hostile is a name from the system (a comm, an interface, a frame) that
// would retitle and clear the user's terminal if printed raw.
const hostile = "x\x1b]0;pwned\x07\x1b[2J"

type texter struct{}

func (texter) WriteText(w io.Writer, _ *Report) error {
	_, err := io.WriteString(w, "jvm "+hostile+"\n")
	return err
}

// Every text renderer reached through Render escapes control characters,
// whatever data the report carries: Render wraps the writer once, so a
// renderer added later cannot forget it.
func TestRenderTextEscapesControlCharacters(t *testing.T) {
	ov := &evidence.Overhead{AttachMethod: "tp_btf", Programs: []evidence.ProgramCost{evidence.NewProgramCost(hostile, 1, time.Microsecond)}}
	for _, data := range []any{
		NetData{NetEvidence: evidence.NetEvidence{Interface: evidence.NetInterface{Name: hostile}}},
		evidence.SoftirqEvidence{DurationNs: int64(time.Second)},
		evidence.Profile{Samples: 1, TopFunctions: []evidence.FunctionSamples{{Function: hostile, Self: 1, Total: 1, SelfShare: 1, TotalShare: 1}}},
		FlameSummary{Unit: flame.Samples, Total: 1, Functions: []flame.FunctionCost{{Name: hostile, Self: 1, Total: 1}}},
		DoctorData{Checks: []DoctorCheck{{Category: "kernel", Name: hostile, Status: "ok", Detail: hostile}}},
		texter{},
	} {
		r := New("test", "v", time.Now())
		r.Data, r.Overhead = data, ov
		var b bytes.Buffer
		if err := Render(&b, r, Text); err != nil {
			t.Fatalf("%T: %v", data, err)
		}
		if strings.ContainsAny(b.String(), "\x1b\x07") {
			t.Errorf("%T: a control character reached the terminal:\n%q", data, b.String())
		}
		if !strings.Contains(b.String(), `\x1b]0;pwned\x07`) {
			t.Errorf("%T: the hostile name is not shown escaped:\n%s", data, b.String())
		}
	}
}
