package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/internal/testutil"
)

// halted is the reason a profile gives for a CPU it did not see on a
// virtual machine without a PMU, sampling with cpu-clock.
const halted = "its sampling clock stops while it idles: a virtual CPU without a PMU"

// cpuIdle is cpu's idle (idle + iowait) and total time in /proc/stat, in
// ticks: the truth a test compares a profile's verdict with.
func cpuIdle(t *testing.T, cpu int) (idle, total float64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "cpu"+strconv.Itoa(cpu) {
			continue
		}
		for i, v := range f[1:9] {
			n, _ := strconv.ParseFloat(v, 64)
			total += n
			if i == 3 || i == 4 {
				idle += n
			}
		}
		return idle, total
	}
	t.Fatalf("no cpu%d in /proc/stat", cpu)
	return 0, 0
}

// idleDuring runs f and returns the share of the time CPU cpu was idle
// meanwhile.
func idleDuring(t *testing.T, cpu int, f func()) float64 {
	t.Helper()
	i0, t0 := cpuIdle(t, cpu)
	f()
	i1, t1 := cpuIdle(t, cpu)
	if t1 <= t0 {
		return 0
	}
	return (i1 - i0) / (t1 - t0)
}

type profileReport struct {
	Data evidence.Profile `json:"data"`
}

func cpuRow(rows []evidence.ProfileCPU, cpu int) *evidence.ProfileCPU {
	for i := range rows {
		if rows[i].CPU == cpu {
			return &rows[i]
		}
	}
	return nil
}

// A busy loop pinned to CPU 0 (perfscope there too) and CPU 1 left alone:
// the profile reports, per CPU, the samples taken beside the frequency ×
// online time, and names CPU 1 as not seen, with the halted-vCPU reason,
// when CPU 1 idled — and not when other work on this shared machine kept
// it busy (its sampling clock then runs). The truth is /proc/stat's idle
// time over the run; CPU 0 is never undersampled.
func TestProfileNamesTheCPUsItCouldNotSee(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	bin := Perfscope(t)
	const freq = 199
	for attempt := 1; ; attempt++ {
		spinner := testutil.StartSpinner(t, 5)
		if out, err := exec.Command("taskset", "-p", "-c", "0", strconv.Itoa(spinner.Process.Pid)).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v\n%s", err, out)
		}
		var rep profileReport
		idle1 := idleDuring(t, 1, func() {
			out, err := exec.Command("taskset", "-c", "0", bin, "profile", "--include-idle", "--per-cpu", "-F", strconv.Itoa(freq), "-d", "3s", "-o", "json").Output()
			if err != nil {
				t.Fatalf("profile: %v", err)
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("json: %v\n%s", err, out)
			}
		})
		spinner.Process.Kill()
		spinner.Wait()
		d := rep.Data
		if d.Event == "" || d.EventReason == "" || d.PMU == "" || d.ExpectedFrom == "" {
			t.Fatalf("the report does not name its event: %+v", d.ProfileSampling)
		}
		c0, c1 := cpuRow(d.PerCPU, 0), cpuRow(d.PerCPU, 1)
		if c0 == nil || c1 == nil || c0.TakenSamples == nil || c0.ExpectedSamples == nil || c1.TakenSamples == nil || c1.ExpectedSamples == nil {
			t.Fatalf("per CPU = %+v", d.PerCPU)
		}
		t.Logf("attempt %d: %s (%s); CPU 0 %d/%d, CPU 1 %d/%d, CPU 1 %.0f %% idle", attempt, d.Event, d.PMU,
			*c0.TakenSamples, *c0.ExpectedSamples, *c1.TakenSamples, *c1.ExpectedSamples, 100*idle1)
		// The window is 3 s: each CPU was online all of it.
		for _, c := range []*evidence.ProfileCPU{c0, c1} {
			if e := float64(*c.ExpectedSamples); d.ExpectedFrom == evidence.ExpectedFromOnline && (e < 0.95*3*freq || e > 1.1*3*freq) {
				t.Errorf("CPU %d expected %v samples from %v ns online; want about %d", c.CPU, e, *c.OnlineNs, 3*freq)
			}
		}
		if c0.Undersampled || slices.Contains(d.UndersampledCPUs, 0) {
			t.Errorf("busy CPU 0 reported undersampled: %+v", *c0)
		}
		if c1.Undersampled != slices.Contains(d.UndersampledCPUs, 1) {
			t.Errorf("CPU 1's row (%v) and undersampled_cpus %v disagree", c1.Undersampled, d.UndersampledCPUs)
		}
		if d.Event != "cpu-clock" || d.PMU != "absent" {
			return // the halted-vCPU effect is that of VMs without a PMU
		}
		switch {
		case idle1 >= 0.85:
			if !c1.Undersampled || c1.UndersampledReason != halted {
				t.Errorf("idle CPU 1 (%d of %d samples): undersampled %v, reason %q; want it named, with %q", *c1.TakenSamples, *c1.ExpectedSamples, c1.Undersampled, c1.UndersampledReason, halted)
			}
			return
		case idle1 <= 0.3:
			if c1.Undersampled {
				t.Errorf("busy CPU 1 (%.0f %% idle) reported undersampled: %+v", 100*idle1, *c1)
			}
		}
		if attempt == 3 {
			t.Logf("CPU 1 was never idle for a whole run: other work on this machine kept it busy")
			return
		}
	}
}

// The event is named and chosen as perf would: cpu-clock asked for is
// used, with the machine's PMU state; cycles asked for where the machine
// has none exits 3 with one sentence naming the way out, and leaves
// nothing behind.
func TestProfileEventFlag(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.LockBPF(t)
	bin := Perfscope(t)
	out, err := exec.Command(bin, "profile", "--event", "cpu-clock", "-d", "500ms", "-o", "json").Output()
	if err != nil {
		t.Fatalf("--event cpu-clock: %v", err)
	}
	var rep profileReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Data; d.Event != "cpu-clock" || d.EventRequested != "cpu-clock" || !strings.HasPrefix(d.EventReason, "as asked") {
		t.Errorf("--event cpu-clock sampled with %+v", d.ProfileSampling)
	}
	pmu := rep.Data.PMU
	beforeProgs, beforeMaps := testutil.BPFProgramIDs(t), testutil.BPFMapIDs(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "profile", "--event", "cycles", "-d", "500ms", "-o", "json")
	cmd.Stderr = &stderr
	_, err = cmd.Output()
	var ee *exec.ExitError
	switch {
	case pmu == "present" && err != nil:
		t.Errorf("cycles on a machine with a PMU: %v\n%s", err, stderr.String())
	case pmu == "absent" && (!errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(stderr.String(), "--event cpu-clock")):
		t.Errorf("cycles without a PMU: %v, %q; want exit 3 naming --event cpu-clock", err, stderr.String())
	}
	testutil.AssertNoNewBPF(t, beforeProgs, beforeMaps)
}
