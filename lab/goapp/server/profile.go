//go:build !noprofile

package main

import (
	"net/http"
	"runtime/pprof"
)

// registerProfile serves the allocation profile the way net/http/pprof
// does. Reaching runtime.MemProfile is what keeps the runtime's allocation
// sampling on: the linker switches it off (MemProfileRate = 0) in a
// program that never reads a memory profile. Built with -tags noprofile,
// the server is such a program.
func registerProfile(mux *http.ServeMux) {
	mux.HandleFunc("/debug/allocs", func(w http.ResponseWriter, r *http.Request) {
		pprof.Lookup("allocs").WriteTo(w, 0)
	})
}
