package offcpu

import (
	"strings"
)

// KernelProcess names the pool of kernel threads, which are each their
// own process.
const KernelProcess = "[kernel]"

// PoolName is the name of the pool a thread named comm belongs to: the
// name with its trailing number replaced by "*", so that
// "pool-2-thread-7", "grpc-default-executor-3", "GC Thread#1" and
// "worker12" join their siblings; a kernel thread's per-CPU or per-queue
// suffix ("kworker/1:2", "ksoftirqd/0") goes after its "/". Names the
// kernel truncated to 15 bytes ("http-nio-8080-e" for every Tomcat
// worker, "pool-2-thread-1" for thread 1 and threads 10-19) are already
// shared by their siblings, and threads of one Go program share its name.
func PoolName(comm string) string {
	if i := strings.IndexByte(comm, '/'); i > 0 && isWord(comm[:i]) {
		return comm[:i] + "/*"
	}
	end := len(comm)
	for end > 0 && comm[end-1] >= '0' && comm[end-1] <= '9' {
		end--
	}
	if end == len(comm) || end == 0 {
		return comm
	}
	return comm[:end] + "*"
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// poolKey is a pool: threads of one process (0: kernel threads) with one
// pool name.
type poolKey struct {
	pid  int
	name string
}

// poolOf is the pool of thread tid of process pid named comm. A kernel
// thread is its own process (tid == pid) with a "name/instance" name;
// its pool spans processes.
func poolOf(pid, tid int, comm string) poolKey {
	name := PoolName(comm)
	if tid == pid && strings.HasSuffix(name, "/*") {
		return poolKey{0, name}
	}
	return poolKey{pid, name}
}
