// The UDP server the live tests place in a container or a pod-shaped
// cgroup: it listens on a loopback port, prints it, reads datagrams until
// stdin closes (or, in a detached container, forever) and exits.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(c.LocalAddr().(*net.UDPAddr).Port)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	if len(os.Args) > 1 && os.Args[1] == "--forever" {
		select {}
	}
}
