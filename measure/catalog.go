package measure

import (
	"github.com/perfscope/perfscope/golang"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/cpuprofile"
	"github.com/perfscope/perfscope/probes/httpcount"
	"github.com/perfscope/perfscope/probes/lockstat"
	"github.com/perfscope/perfscope/probes/netqueue"
	offcpuprobe "github.com/perfscope/perfscope/probes/offcpu"
	"github.com/perfscope/perfscope/probes/softirq"
	"github.com/perfscope/perfscope/probes/tcpevents"
	"github.com/perfscope/perfscope/probes/udpdrop"
	"github.com/perfscope/perfscope/probes/udpsock"
	"github.com/perfscope/perfscope/spec"
)

// Catalog is every probe and part perfscope has, one spec each (declared
// beside its code: probes/NAME/spec.go, measure/spec_NAME.go,
// golang/spec.go), in the order recipes, doctor and the container needs
// list them. The recipe language, doctor, the container needs, the
// budget's references and the rules' inputs read it: adding a part is
// writing its spec and one line here.
var Catalog = []*spec.Part{
	&softirq.Spec,
	&netqueue.Spec,
	&lockstat.Spec,
	&udpdrop.Spec,
	&udpsock.Spec,
	&TCPSpec,
	&tcpevents.Spec,
	&httpcount.Spec,
	&offcpuprobe.Spec,
	&cpuprofile.Spec,
	&golang.Spec,
	&NetCountersSpec,
	&HSPerfSpec,
	&AsyncProfilerSpec,
	&GCLogSpec,
}

// CatalogPart finds a part of the catalog by name.
func CatalogPart(name string) (*spec.Part, bool) {
	for _, p := range Catalog {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// CatalogHooks are every tracepoint the catalog's probes attach, each
// with the probe that declares it, in catalog order: what doctor checks.
func CatalogHooks() []probes.CatalogEntry {
	var out []probes.CatalogEntry
	for _, p := range Catalog {
		for _, h := range p.Hooks {
			out = append(out, probes.CatalogEntry{Probe: p.Name, Hook: h})
		}
	}
	return out
}

// NeedsOf maps each part a recipe can name to what it needs of a
// container: its own needs and those of the probes it uses.
func NeedsOf() map[string][]spec.Need {
	out := map[string][]spec.Need{}
	for _, p := range Catalog {
		if p.Recipe {
			out[p.Name] = p.AllNeeds()
		}
	}
	return out
}

// referenceOf is the counter a sampled hook group follows, from the spec
// of the probe that declares the group.
func referenceOf(group string) spec.Reference {
	for _, p := range Catalog {
		if r, ok := p.References[group]; ok {
			return r
		}
	}
	return spec.RefPackets
}
