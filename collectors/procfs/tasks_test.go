package procfs

import (
	"errors"
	"io/fs"
	"testing"
	"time"
)

// A JVM with two executors (OpenJDK 17, recorded on the project's VM):
// 26 threads whose names the kernel truncated to 15 bytes.
func TestTasksOfARecordedJVM(t *testing.T) {
	f := FS{Root: "testdata/jvmthreads"}
	tasks, err := f.Tasks(13918)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 26 {
		t.Fatalf("%d threads, want 26", len(tasks))
	}
	names := map[string]int{}
	for _, tk := range tasks {
		names[tk.Comm]++
		if tk.Sched == nil || tk.State != 'S' {
			t.Errorf("thread %d: state %c schedstat %v", tk.TID, tk.State, tk.Sched)
		}
	}
	if names["http-nio-8080-e"] != 2 || names["pool-1-thread-3"] != 1 || names["C2 CompilerThre"] != 1 {
		t.Errorf("names %v", names)
	}
	if c2 := tasks[13]; c2.Comm != "C2 CompilerThre" || c2.Sched.OnCPU != 819456668*time.Nanosecond || c2.Sched.RunQueueWait != 1494392795*time.Nanosecond || c2.Sched.Timeslices != 4024 {
		t.Errorf("C2 compiler thread = %+v %+v", c2, *c2.Sched)
	}
	if st, err := f.ProcessState(13918); err != nil || st != 'S' {
		t.Errorf("ProcessState = %c, %v", st, err)
	}
	if _, err := f.Tasks(1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a process that is not there: %v", err)
	}
}

func TestParseTaskStat(t *testing.T) {
	for _, c := range []struct {
		in    string
		comm  string
		state byte
		bad   bool
	}{
		{in: "13920 (GC Thread#0) S 13916 13916", comm: "GC Thread#0", state: 'S'},
		{in: "7 (a) b) (c) R 1 2", comm: "a) b) (c", state: 'R'},
		{in: "7 () D 1", comm: "", state: 'D'},
		{in: "7 (x)", bad: true},
		{in: "7 x S", bad: true},
		{in: "", bad: true},
	} {
		comm, state, err := parseTaskStat(c.in)
		if (err != nil) != c.bad || !c.bad && (comm != c.comm || state != c.state) {
			t.Errorf("parseTaskStat(%q) = %q %q %v", c.in, comm, state, err)
		}
	}
	for _, bad := range []string{"1 2", "1 2 3 4", "a 2 3", "-1 2 3"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
}
