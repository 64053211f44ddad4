package udpflood

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/perfscope/perfscope/collectors/ethtool"
)

// ErrLeavesMachine is returned for a target whose route leaves this
// machine.
var ErrLeavesMachine = errors.New("the route to the target leaves this machine")

// LabNetnsDir and LabNetnsPrefix say where the lab's namespaces are: a
// flood outside loopback is allowed only from inside one of them.
var (
	LabNetnsDir    = "/run/netns"
	LabNetnsPrefix = "perfscope-"
)

// CheckLocalRoute refuses a target the kernel would route off the machine.
// It asks the kernel for the route by connecting a UDP socket (nothing is
// sent) and looks at the interface owning the source address chosen: it
// must be a loopback interface, or the lab's veth inside one of the lab's
// own network namespaces. In the host namespace, 198.18.0.2 goes out of
// the default gateway; only the lab's namespaces route it over the veth.
func CheckLocalRoute(target netip.Addr) error {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(target, 9)))
	if err != nil {
		return fmt.Errorf("no route to %s: %w", target, err)
	}
	src := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	c.Close()
	iface, err := interfaceWith(src)
	if err != nil {
		return err
	}
	if iface.Flags&net.FlagLoopback != 0 {
		return nil
	}
	ns, inLab := labNamespace()
	if inLab && isVeth(iface.Name) {
		return nil
	}
	where := "the host's network namespace"
	if ns != "" {
		where = "namespace " + ns
	}
	return fmt.Errorf("--target %s: %w (from %s it goes out of %s, which is neither loopback nor the lab's veth in a perfscope lab namespace); udp-flood sends to other machines never", target, ErrLeavesMachine, where, iface.Name)
}

func interfaceWith(addr netip.Addr) (net.Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return net.Interface{}, err
	}
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
					return ifc, nil
				}
			}
		}
	}
	return net.Interface{}, fmt.Errorf("no interface holds source address %s", addr)
}

// labNamespace names the lab namespace this process runs in, by comparing
// its network namespace with those under LabNetnsDir.
func labNamespace() (string, bool) {
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return "", false
	}
	entries, _ := os.ReadDir(LabNetnsDir)
	for _, e := range entries {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(LabNetnsDir, e.Name()), &st) == nil && st.Ino == self.Ino && st.Dev == self.Dev {
			return e.Name(), strings.HasPrefix(e.Name(), LabNetnsPrefix)
		}
	}
	return "", false
}

// isVeth asks the driver (ETHTOOL_GDRVINFO): sysfs may show the host's
// devices inside a namespace.
func isVeth(name string) bool {
	info, err := ethtool.Ioctl{}.DriverInfo(name)
	return err == nil && info.Driver == "veth"
}
