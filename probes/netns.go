package probes

import (
	"fmt"
	"os"
	"syscall"
)

// NetnsInode is the inode number that names the network namespace at path
// (/proc/PID/ns/net, /var/run/netns/NAME): the kernel's net->ns.inum, which
// BPF programs compare to tell devices and sockets of different namespaces
// apart (an ifindex or a port is unique only inside one namespace).
func NetnsInode(path string) (uint32, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("network namespace: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Ino == 0 || sys.Ino > 1<<32-1 {
		return 0, fmt.Errorf("network namespace %s: no 32-bit inode number", path)
	}
	return uint32(sys.Ino), nil
}

// OwnNetns is the inode of this process's network namespace: the one
// perfscope measures, since it refuses interfaces that live elsewhere.
func OwnNetns() (uint32, error) { return NetnsInode("/proc/self/ns/net") }

// NetnsOrOwn is inode, or this process's namespace when inode is 0 (the
// probes' Options default).
func NetnsOrOwn(inode uint32) (uint32, error) {
	if inode != 0 {
		return inode, nil
	}
	return OwnNetns()
}
