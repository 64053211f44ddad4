package gclog

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// JDKs the tests run a small allocating program under; CI installs both.
var jdks = []string{"/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/temurin-25-jdk-amd64"}

// pauseLine is what `grep -cE` would count as a pause in a unified log:
// the summary line of each pause, with its duration.
var pauseLine = regexp.MustCompile(`\] GC\(\d+\) (?:[yYoO]: )?Pause .*[0-9](?:ms|s)$`)

func grepPauses(t *testing.T, path string) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pauseLine.Match(sc.Bytes()) {
			n++
		}
	}
	return n
}

// TestLogsFromLocalJDKs runs testdata/Alloc.java for about a second under
// each collector of each local JDK with -Xlog:gc* and checks the parser
// against the fresh log: pause count equal to grep's, nothing unknown, the
// collector named, an allocation rate found.
func TestLogsFromLocalJDKs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs JVMs")
	}
	var have []string
	for _, j := range jdks {
		if _, err := os.Stat(filepath.Join(j, "bin", "java")); err == nil {
			have = append(have, j)
		}
	}
	if len(have) == 0 {
		t.Skip("no JDK under /usr/lib/jvm (CI installs OpenJDK 17 and Temurin 25)")
	}
	classes := t.TempDir()
	javac := filepath.Join(have[0], "bin", "javac")
	if out, err := exec.Command(javac, "--release", "17", "-d", classes, "testdata/Alloc.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	collectors := []struct{ flag, name string }{
		{"-XX:+UseG1GC", "G1"}, {"-XX:+UseParallelGC", "Parallel"}, {"-XX:+UseSerialGC", "Serial"},
		{"-XX:+UseZGC", "ZGC"}, {"-XX:+UseShenandoahGC", "Shenandoah"},
	}
	for _, jdk := range have {
		java := filepath.Join(jdk, "bin", "java")
		for _, c := range collectors {
			t.Run(filepath.Base(jdk)+"/"+c.name, func(t *testing.T) {
				if err := exec.Command(java, c.flag, "-version").Run(); err != nil {
					t.Skipf("%s is not built into %s", c.name, jdk)
				}
				log := filepath.Join(t.TempDir(), "gc.log")
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, java, c.flag, "-Xmx64m", "-Xlog:gc*:file="+log, "-cp", classes, "Alloc", "800")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("java: %v\n%s", err, out)
				}
				s := analyze(t, log)
				// A young pause that escalated to a full one is two pause
				// lines and one pause.
				if want := grepPauses(t, log); s.All.Count+s.Escalated != want {
					t.Errorf("%d pauses (%d escalated), grep counts %d", s.All.Count, s.Escalated, want)
				}
				if s.Parse.Unknown != 0 {
					t.Errorf("%d unknown lines: %q", s.Parse.Unknown, s.Parse.UnknownSamples)
				}
				if s.Collector != c.name {
					t.Errorf("collector %q, want %q", s.Collector, c.name)
				}
				if s.Allocation.Rate <= 0 {
					t.Errorf("no allocation rate (allocated %v over the log)", s.Allocation.Allocated)
				}
				switch c.name {
				case "G1", "Parallel", "Serial":
					if s.YoungGCs == 0 || (s.Allocation.Source != "eden" && s.Allocation.Source != "young") {
						t.Errorf("%d young GCs, alloc from %q", s.YoungGCs, s.Allocation.Source)
					}
					if !s.Allocation.PromotionKnown {
						t.Error("promotion not computed")
					}
				default:
					if s.Concurrent.Count == 0 {
						t.Error("no concurrent phases")
					}
				}
			})
		}
	}
}
