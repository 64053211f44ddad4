//go:build !go1.24

package main

import (
	"errors"
	"net"
	"net/http"
)

// serve answers HTTP/1.1; h2c needs Go 1.24's http.Protocols.
func serve(ln net.Listener, h http.Handler, h2c bool) error {
	if h2c {
		return errors.New("-h2c needs a service built with Go 1.24 or later")
	}
	return http.Serve(ln, h)
}
