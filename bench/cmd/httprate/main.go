// Command httprate drives one HTTP load with base/httpload — at a fixed
// rate (-rate) or as fast as the server answers (-rate 0) — for a fixed
// time, and prints its result as one JSON line, for bench/offcpuhttp.sh.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/perfscope/perfscope/base/httpload"
)

func main() {
	url := flag.String("url", "", "the URL to load")
	rate := flag.Float64("rate", 0, "requests per second (0: closed loop, as fast as answered)")
	conc := flag.Int("c", 16, "connections")
	dur := flag.Duration("d", 5*time.Second, "how long to send")
	flag.Parse()
	res, err := httpload.Run(context.Background(), httpload.Spec{URL: *url, Concurrency: *conc, Rate: *rate, Duration: *dur, Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "httprate:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}
