package serve

import (
	"net"
	"strings"
	"time"

	"github.com/perfscope/perfscope/measure"
)

// DefaultListen is loopback: metrics say what runs on the host, and only
// an explicit --listen exposes them beyond it.
const DefaultListen = "127.0.0.1:9742"

// Flags are `perfscope serve`'s flags as given.
type Flags struct {
	Recipe        string
	Listen        string
	WebConfigFile string
	Interval      time.Duration
	Set           []string
	TopWorkloads  int
}

// Options checks the flags and gives the served recipe's options (the
// caller adds Log, Started, Version and OnListen). Every refusal is one
// sentence naming the flag, bad input.
func (f Flags) Options() (Options, error) {
	o := Options{Recipe: f.Recipe, Listen: f.Listen, Interval: f.Interval, TopWorkloads: f.TopWorkloads}
	if f.Recipe == "" {
		return o, measure.BadInput("--recipe is required (%s)", strings.Join(Names(), ", "))
	}
	if f.Interval < time.Second || f.Interval > time.Hour {
		return o, measure.BadInput("--interval must be between 1s and 1h, got %v", f.Interval)
	}
	if f.TopWorkloads < 1 || f.TopWorkloads > MaxTopWorkloads {
		return o, measure.BadInput("--top-workloads must be between 1 and %d, got %d", MaxTopWorkloads, f.TopWorkloads)
	}
	host, port, err := net.SplitHostPort(f.Listen)
	if err != nil {
		return o, measure.BadInput("--listen %q: want host:port, e.g. %s", f.Listen, DefaultListen)
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return o, measure.BadInput("--listen %q: the host must be an IP address or localhost", f.Listen)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return o, measure.BadInput("--listen %q: bad port", f.Listen)
	}
	if f.WebConfigFile != "" {
		web, err := LoadWebConfig(f.WebConfigFile)
		if err != nil {
			return o, measure.MarkBadInput(err)
		}
		o.Web = &web
	}
	o.Params = map[string]string{}
	for _, kv := range f.Set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, measure.BadInput("--set %q: want KEY=VALUE", kv)
		}
		o.Params[k] = v
	}
	return o, nil
}
