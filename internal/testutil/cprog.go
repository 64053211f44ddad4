package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BuildC compiles a C program from source with gcc into a temporary
// directory and returns the executable's path. Symbolization and profiling
// tests use it to get a binary whose function names they know. Extra gcc
// flags (e.g. "-static", "-no-pie") follow the defaults: -O1 with frame
// pointers, so user stacks unwind as in a production build that keeps them.
func BuildC(t testing.TB, source string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is needed to build the test program: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	args := append([]string{"-O1", "-g", "-fno-omit-frame-pointer", "-o", bin, src}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, out)
	}
	return bin
}

// SpinFunction is the function the spinner program burns CPU in.
const SpinFunction = "spin_here_forever"

// spinC burns CPU in one known function for the number of seconds given as
// its argument; alarm bounds it in case the test dies first.
const spinC = `
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void spin_here_forever(double seconds) {
	double end = now() + seconds;
	while (now() < end)
		for (unsigned long i = 0; i < 2000000; i++)
			sink += i;
}

int main(int argc, char **argv) {
	alarm(15);
	spin_here_forever(argc > 1 ? atof(argv[1]) : 3);
	return 0;
}
`

// StartSpinner builds and starts a C program that spends the given number
// of seconds (at most 15) in SpinFunction, and kills it when t ends.
// Profiling tests look for that function at the top of the profile.
func StartSpinner(t testing.TB, seconds float64) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(BuildC(t, spinC), fmt.Sprint(seconds))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}
