package probes

// CatalogEntry is one tracepoint, the probe that attaches it and what
// perfscope uses it for (Hook.UsedFor). The entries come from the probes'
// specs (measure.Catalog): a probe declares its hooks once, in its own
// spec.go, and `perfscope doctor` checks every one.
type CatalogEntry struct {
	// Probe is the probe's name ("softirq", "netqueue").
	Probe string
	Hook
}
