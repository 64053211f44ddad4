package report

import (
	"github.com/perfscope/perfscope/collectors/netconfig"
	"github.com/perfscope/perfscope/evidence"
)

// NetData is the data section of `perfscope udp -o json`: the run's
// evidence and the configuration read at its start. The configuration is
// a collector's snapshot, which evidence does not import; its JSON sits
// beside the evidence's fields as "config", as it always has.
type NetData struct {
	evidence.NetEvidence
	// Config is nil when the configuration could not be read at all.
	Config *netconfig.NetConfig `json:"config,omitempty"`
}
