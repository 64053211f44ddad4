package udpflood

import (
	"fmt"
	"net/netip"
	"time"
)

// Flags are `perfscope lab udp-flood`'s flags as given.
type Flags struct {
	Target     string
	Senders    int
	Flows      int
	Payload    int
	Duration   time.Duration
	MaxPackets uint64
	Rate       int
}

// labNet is the lab's benchmark range (RFC 2544), which exists only
// inside the lab's namespaces.
var labNet = netip.MustParsePrefix("198.18.0.0/15")

// Config checks the flags and gives the flood they describe: outside
// loopback only to the lab's 198.18.0.0/15, and only where the route
// stays on this machine. Every error is one sentence naming the flag, the
// user's to correct.
func (f Flags) Config() (Config, error) {
	target, err := netip.ParseAddrPort(f.Target)
	if err != nil {
		return Config{}, fmt.Errorf("--target %q: want ADDR:PORT", f.Target)
	}
	if f.Rate < 0 {
		return Config{}, fmt.Errorf("--rate must be 0 (unpaced) or positive, got %d", f.Rate)
	}
	if !target.Addr().IsLoopback() && !labNet.Contains(target.Addr()) {
		return Config{}, fmt.Errorf("--target %s: udp-flood only sends to loopback or the lab's 198.18.0.0/15", target)
	}
	if f.Payload < 1 {
		return Config{}, fmt.Errorf("--payload must be between 1 and %d bytes, got %d", MaxPayload, f.Payload)
	}
	cfg := Config{
		Target: target, Senders: f.Senders, Flows: f.Flows, Payload: f.Payload, Duration: f.Duration,
		MaxPackets: f.MaxPackets, AllowNonLoopback: true, Rate: f.Rate,
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	// The address alone proves nothing: in the host's namespace
	// 198.18.0.2 routes out of the default gateway to the real network.
	if err := CheckLocalRoute(target.Addr()); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
