// Command genfolded writes a deterministic synthetic profile in folded
// format for the flame graph benchmark (bench/flame.sh): stacks walk a fixed
// random call graph of Java, native, Go and kernel frames, so that they
// share prefixes the way real profiles do, and come out in generation order
// (unsorted, like async-profiler's collapsed output).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

func main() {
	stacks := flag.Int("stacks", 200000, "number of distinct stack lines")
	minDepth := flag.Int("min-depth", 10, "shallowest stack")
	maxDepth := flag.Int("max-depth", 40, "deepest stack")
	seed := flag.Uint64("seed", 5, "random seed (same seed, same file)")
	flag.Parse()
	if *stacks <= 0 || *minDepth <= 0 || *maxDepth < *minDepth {
		fmt.Fprintln(os.Stderr, "genfolded: need stacks > 0 and 0 < min-depth <= max-depth")
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(*seed, *seed^0x9e3779b97f4a7c15))
	names := namePool(rng, 5000)
	kernel := kernelPool(512)
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	const fanout = 6
	var line []byte
	for i := 0; i < *stacks; i++ {
		depth := *minDepth + rng.IntN(*maxDepth-*minDepth+1)
		line = line[:0]
		// A handful of thread roots, then a walk where each frame's callees
		// are a fixed set derived from the caller; the first callee is the
		// most likely, as in real call graphs.
		cur := rng.IntN(16)
		for d := 0; d < depth; d++ {
			if d > 0 {
				line = append(line, ';')
				k := min(int(rng.ExpFloat64()*1.2), fanout-1)
				cur = int((uint64(cur)*2654435761 + uint64(k)*40503 + uint64(d)*97) % uint64(len(names)))
			}
			name := names[cur]
			if d >= depth-3 && depth > 12 {
				name = kernel[cur%len(kernel)]
			}
			line = append(line, name...)
		}
		line = append(line, ' ')
		line = strconv.AppendInt(line, 1+int64(rng.ExpFloat64()*60), 10)
		line = append(line, '\n')
		w.Write(line)
	}
}

// namePool makes frame names of the kinds perfscope colours differently,
// short enough (about 18 bytes) that 200 000 stacks make about 90 MB.
func namePool(rng *rand.Rand, n int) []string {
	pkgs := []string{"com/ex", "kafka", "netty", "juc"}
	goPkgs := []string{"store", "net/http", "os", "json"}
	words := []string{"Order", "Pay", "Chan", "Buf", "Req", "Sess", "Codec", "Cache"}
	verbs := []string{"run", "put", "get", "enc", "dec", "flush", "read", "write"}
	out := make([]string, n)
	for i := range out {
		w, v := words[rng.IntN(len(words))], verbs[rng.IntN(len(verbs))]
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			out[i] = fmt.Sprintf("%s/%s.%s%d_[j]", pkgs[rng.IntN(len(pkgs))], w, v, i)
		case 4:
			out[i] = fmt.Sprintf("%s/%s.%s%d_[i]", pkgs[rng.IntN(len(pkgs))], w, v, i)
		case 5:
			out[i] = fmt.Sprintf("%s.(*%s).%s%d", goPkgs[rng.IntN(len(goPkgs))], w, v, i)
		case 6:
			out[i] = fmt.Sprintf("%s.%s%d_[0]", w, v, i)
		default:
			out[i] = fmt.Sprintf("%s::%s%d", w, v, i)
		}
	}
	return out
}

// kernelPool is the kernel tail of stacks: few distinct functions.
func kernelPool(n int) []string {
	verbs := []string{"tcp_sendmsg", "do_syscall", "ep_poll", "futex_wait", "schedule", "copy_user"}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s_%d_[k]", verbs[i%len(verbs)], i)
	}
	return out
}
