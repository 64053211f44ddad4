package cli

import (
	"io"
	"os"
	"time"

	"github.com/perfscope/perfscope/report"
	"golang.org/x/sys/unix"
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newProgress draws the window's progress on w when it is a terminal.
func newProgress(w io.Writer, d time.Duration) *report.Progress {
	f, ok := w.(*os.File)
	return report.NewProgress(w, ok && isTerminal(f), d)
}
