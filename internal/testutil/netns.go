package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// InNetns runs fn on an OS thread switched into the named network namespace
// (/var/run/netns/NAME, as `ip netns` and lab/netlab create them);
// sockets fn creates belong to that namespace for their whole life, even
// when other goroutines use them afterwards.
func InNetns(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime then ends it with the
		// goroutine instead of reusing a thread in the wrong namespace.
		return errors.Join(fnErr, fmt.Errorf("restore netns: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// NewNetns creates a network namespace for one test, named prefix plus
// this process's pid, with lo up, and deletes it when the test ends (a
// leftover of a killed run of the same name is deleted first). It
// returns the name (for InNetns) and its path (/run/netns/NAME).
func NewNetns(t testing.TB, prefix string) (name, path string) {
	t.Helper()
	name = fmt.Sprintf("%s%d", prefix, os.Getpid())
	exec.Command("ip", "netns", "del", name).Run()
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{{"netns", "add", name}, {"-n", name, "link", "set", "lo", "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	return name, "/run/netns/" + name
}
