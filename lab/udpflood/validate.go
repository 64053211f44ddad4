package udpflood

import (
	"errors"
	"fmt"
	"time"
)

// Bounds of a flood: a lab tool, never a load generator for real networks.
const (
	MaxDuration = 10 * time.Minute
	MaxSenders  = 64
	// MaxFlows bounds the sockets a flood opens.
	MaxFlows = 1024
	// MaxPayload is the largest UDP payload over IPv4 (65535 − 20 − 8).
	MaxPayload = 65507
)

// ErrInvalid marks a configuration the flood refuses.
var ErrInvalid = errors.New("invalid udp-flood configuration")

// Validate checks cfg's bounds; Send also calls it.
func (cfg Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case !cfg.Target.IsValid():
		return bad("no target")
	case cfg.Target.Port() == 0:
		return bad("target port 0")
	case cfg.Duration <= 0 || cfg.Duration > MaxDuration:
		return bad("duration must be in (0, %v], got %v", MaxDuration, cfg.Duration)
	case cfg.Senders < 1 || cfg.Senders > MaxSenders:
		return bad("senders must be between 1 and %d, got %d", MaxSenders, cfg.Senders)
	case cfg.Flows != 0 && (cfg.Flows < cfg.Senders || cfg.Flows > MaxFlows):
		return bad("flows must be between the number of senders (%d) and %d, got %d", cfg.Senders, MaxFlows, cfg.Flows)
	case cfg.Payload < 0 || cfg.Payload > MaxPayload:
		return bad("payload must be between 0 and %d bytes, got %d", MaxPayload, cfg.Payload)
	case cfg.Rate < 0:
		return bad("rate must be 0 (unpaced) or positive, got %d", cfg.Rate)
	}
	return nil
}
