package attach

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/base/gosafe"
)

// asUser runs fn on an OS thread whose effective uid and gid are the
// JVM's, so the listener's peer-credential check (SO_PEERCRED reports the
// effective ids at connect time) sees its own user. Only that thread
// changes: raw setresuid/setresgid act per thread on Linux, unlike
// syscall.Setuid, which Go applies to every thread. The saved ids stay
// root so the thread can switch back; if it cannot, it is never unlocked
// and the runtime discards it when the goroutine ends.
func asUser(uid, gid int, fn func() error) error {
	if uid < 0 && gid < 0 {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		origUID, origGID := unix.Geteuid(), unix.Getegid()
		// gid first: after giving up euid 0 it could no longer change.
		if err := setresgid(-1, gid, -1); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("switch to gid %d: %w", gid, err)
			return
		}
		if err := setresuid(-1, uid, -1); err != nil {
			if setresgid(-1, origGID, -1) == nil {
				runtime.UnlockOSThread()
			}
			done <- fmt.Errorf("switch to uid %d: %w", uid, err)
			return
		}
		// A panic in fn must not skip switching back (the thread would
		// then be discarded, which is safe, but the panic would crash
		// the process): it comes back as an error.
		err := gosafe.Call(fn)
		if setresuid(-1, origUID, -1) == nil && setresgid(-1, origGID, -1) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

func setresuid(r, e, s int) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(r), uintptr(e), uintptr(s)); errno != 0 {
		return errno
	}
	return nil
}

func setresgid(r, e, s int) error {
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(r), uintptr(e), uintptr(s)); errno != 0 {
		return errno
	}
	return nil
}
