package tcpevents

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/perfscope/perfscope/probes"
)

// MarshalText gives Key a text form, so a Snapshot encodes as JSON (a
// recorded run's map key): the two addresses as netip writes them ("" for
// none; an address never holds a "/"), then the event, state, detail and
// error as probes.MarshalKey writes integers.
func (k Key) MarshalText() ([]byte, error) {
	local, err := k.Local.MarshalText()
	if err != nil {
		return nil, err
	}
	remote, err := k.Remote.MarshalText()
	if err != nil {
		return nil, err
	}
	rest := probes.MarshalKey(int64(k.Event), int64(k.State), int64(k.Detail), int64(k.Err))
	return fmt.Appendf(nil, "%s/%s/%s", local, remote, rest), nil
}

// UnmarshalText reads MarshalText's form.
func (k *Key) UnmarshalText(b []byte) error {
	parts := strings.SplitN(string(b), "/", 3)
	if len(parts) != 3 {
		return fmt.Errorf("tcpevents key %q: want two addresses and four numbers", b)
	}
	var local, remote netip.AddrPort
	if err := local.UnmarshalText([]byte(parts[0])); err != nil {
		return fmt.Errorf("tcpevents key %q: %w", b, err)
	}
	if err := remote.UnmarshalText([]byte(parts[1])); err != nil {
		return fmt.Errorf("tcpevents key %q: %w", b, err)
	}
	var event, state, detail, errno int64
	if err := probes.UnmarshalKey([]byte(parts[2]), &event, &state, &detail, &errno); err != nil {
		return fmt.Errorf("tcpevents key: %w", err)
	}
	*k = Key{Local: local, Remote: remote, Event: Event(event), State: uint8(state), Detail: uint32(detail), Err: int32(errno)}
	return nil
}
