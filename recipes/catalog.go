package recipes

import (
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/spec"
)

// Option is one setting of a probe or collector in a recipe, as its spec
// declares it.
type Option = spec.Option

// Component is a probe or collector a recipe can name: its spec. The
// catalog (measure.Catalog) is everything a recipe can load. Nothing else
// runs.
type Component = spec.Part

// optionOf finds one of a component's options by name.
func optionOf(c Component, name string) (Option, bool) {
	for _, o := range c.Options {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// The report sections a recipe's components fill.
const (
	SectionNet       = spec.SectionNet
	SectionSoftirq   = spec.SectionSoftirq
	SectionLocks     = spec.SectionLocks
	SectionProfile   = spec.SectionProfile
	SectionJVMPauses = spec.SectionJVMPauses
	SectionJVM       = spec.SectionJVM
	SectionGC        = spec.SectionGC
	SectionOffCPU    = spec.SectionOffCPU
)

var attachMethods = []string{"", "tp_btf", "raw_tp", "tracepoint"}

// Probes are the BPF probes a recipe can load, and Collectors the readers
// of /proc, /sys, hsperfdata, GC logs and async-profiler (they attach
// nothing to the kernel), in catalog order.
var Probes, Collectors = recipeParts()

func recipeParts() (probes, collectors []Component) {
	for _, p := range measure.Catalog {
		switch {
		case !p.Recipe:
		case p.Probe:
			probes = append(probes, *p)
		default:
			collectors = append(collectors, *p)
		}
	}
	return probes, collectors
}

// component finds a catalog entry by name in one list.
func component(list []Component, name string) (Component, bool) {
	for _, c := range list {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

func componentNames(list []Component) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Name
	}
	return out
}
