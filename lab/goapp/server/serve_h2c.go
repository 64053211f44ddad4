//go:build go1.24

package main

import (
	"net"
	"net/http"
)

// serve answers HTTP/1.1 and, with h2c, HTTP/2 without TLS on the same
// port (prior knowledge, as gRPC clients speak it): Go 1.24's
// http.Protocols.
func serve(ln net.Listener, h http.Handler, h2c bool) error {
	srv := &http.Server{Handler: h}
	if h2c {
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	return srv.Serve(ln)
}
