package offcpu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/perfscope/perfscope/collectors/sockets"
	"github.com/perfscope/perfscope/collectors/tcpdiag"
)

// ErrNotLocal means a URL's host is not an address of this machine: the
// service behind it cannot be found (or measured) here.
var ErrNotLocal = errors.New("not an address of this machine")

// ErrNoListener means no process of this machine listens on the URL's
// port (in perfscope's network namespace).
var ErrNoListener = errors.New("no local process listens there")

// ServiceOf finds the processes serving a URL on this machine: those
// holding a TCP listener on its port whose address is the URL's (or the
// wildcard). nginx's master and workers all hold its listener: all are
// returned, in increasing order.
func ServiceOf(raw string, fs sockets.FS) ([]int, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("URL %q has no host", raw)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, fmt.Errorf("URL %q: port %q", raw, port)
	}
	addrs, err := localAddrs(u.Hostname())
	if err != nil {
		return nil, err
	}
	socks, err := tcpdiag.Sockets(tcpdiag.Query{States: tcpdiag.StatesOf(tcpdiag.Listen), Port: uint16(p)})
	if err != nil {
		return nil, fmt.Errorf("list the listeners on port %d: %w", p, err)
	}
	var mine []tcpdiag.Socket
	for _, s := range socks {
		a := s.Local.Addr().Unmap()
		if a.IsUnspecified() || addrs[a] {
			mine = append(mine, s)
		}
	}
	if err := tcpdiag.AttachOwners(fs, mine); err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var pids []int
	for _, s := range mine {
		for _, pid := range s.PIDs {
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("port %d of %s: %w", p, u.Hostname(), ErrNoListener)
	}
	sort.Ints(pids)
	return pids, nil
}

// localAddrs resolves host and keeps its addresses when every one is this
// machine's (a loopback or an interface's address).
func localAddrs(host string) (map[netip.Addr]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("this machine's addresses: %w", err)
	}
	local := map[netip.Addr]bool{}
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			local[p.Addr().Unmap()] = true
		}
	}
	out := map[netip.Addr]bool{}
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsLoopback() && !local[ip] {
			return nil, fmt.Errorf("%s (%s): %w", host, ip, ErrNotLocal)
		}
		out[ip] = true
	}
	return out, nil
}
