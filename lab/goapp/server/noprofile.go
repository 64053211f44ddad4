//go:build noprofile

package main

import "net/http"

func registerProfile(*http.ServeMux, bool) {}
