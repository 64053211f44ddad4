package report

import (
	"fmt"
	"io"
)

// ChangeLine is one change --apply or --revert made, left or skipped:
// Verb says which ("applied", "unchanged", "reverted", "already old",
// "gone", "left as found"), Command is the change as a quoted shell
// command (safe to show on a terminal), Note why it was skipped or what
// differed from the run.
type ChangeLine struct {
	Verb, FindingID, Command, Note string
}

// WriteChangeLog prints one line per change: "applied [ID]: COMMAND
// (note)".
func WriteChangeLog(w io.Writer, lines []ChangeLine) {
	for _, l := range lines {
		line := fmt.Sprintf("%s [%s]: %s", l.Verb, l.FindingID, l.Command)
		if l.Note != "" {
			line += " (" + l.Note + ")"
		}
		fmt.Fprintln(w, line)
	}
}
