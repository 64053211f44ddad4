package report

import "io"

// RunError is the error member of a JSON report: a run that failed still
// prints one JSON document, so scripts parsing -o json see why.
type RunError struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

// WriteJSONWithError writes r as JSON with the error that ended the run
// and its exit code beside the envelope's fields; a nil err writes r as
// it is.
func WriteJSONWithError(w io.Writer, r *Report, err error, exitCode int) error {
	if err == nil {
		return WriteJSON(w, r)
	}
	return WriteJSON(w, struct {
		*Report
		Error RunError `json:"error"`
	}{r, RunError{Message: err.Error(), ExitCode: exitCode}})
}
