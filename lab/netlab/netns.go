package netlab

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetnsDir is where `ip netns add` mounts the named namespaces.
var NetnsDir = "/run/netns"

// InNetns runs fn on an OS thread that has entered network namespace ns,
// so that the sockets and devices fn creates belong to ns (a socket keeps
// the namespace it was created in, whichever thread uses it later). The
// thread is never given back to the Go scheduler: it exits with its
// goroutine, so no other goroutine of the process ever runs in the lab's
// namespace by accident.
func InNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join(NetnsDir, ns))
		if err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
		f.Close()
		if err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
