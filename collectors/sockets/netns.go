package sockets

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// NetNS is the inode of the network namespace of pid ("self" for this
// process), from the "net:[N]" link /proc/PID/ns/net. Sockets' namespaces
// are compared by it: the kernel's ns.inum is the same number.
func (fs FS) NetNS(pid string) (uint32, error) {
	target, err := os.Readlink(fs.Path("/proc/" + pid + "/ns/net"))
	if err != nil {
		return 0, err
	}
	return parseNetNSLink(target)
}

func parseNetNSLink(target string) (uint32, error) {
	rest, ok := strings.CutPrefix(target, "net:[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return 0, fmt.Errorf("network namespace link %q is not net:[N]", target)
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("network namespace link %q: %w", target, err)
	}
	return uint32(n), nil
}
