//go:build !noprofile

package main

import (
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
)

// registerProfile serves the allocation profile the way net/http/pprof
// does. Reaching runtime.MemProfile is what keeps the runtime's allocation
// sampling on: the linker switches it off (MemProfileRate = 0) in a
// program that never reads a memory profile. Built with -tags noprofile,
// the server is such a program. withPprof also serves net/http/pprof's
// own handlers under /debug/pprof/ (what a service exposing pprof has:
// /debug/pprof/allocs?seconds=N is the delta profile a user would fetch).
func registerProfile(mux *http.ServeMux, withPprof bool) {
	mux.HandleFunc("/debug/allocs", func(w http.ResponseWriter, r *http.Request) {
		rpprof.Lookup("allocs").WriteTo(w, 0)
	})
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
}
