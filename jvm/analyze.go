package jvm

import (
	"sort"
	"strings"

	"github.com/perfscope/perfscope/evidence"
	"github.com/perfscope/perfscope/jvm/asprof"
)

// loggingFrameworks maps frame prefixes (dotted) to the framework they
// belong to. A stack is charged to the innermost framework it runs
// through: an slf4j call that lands in logback costs what logback does.
var loggingFrameworks = []struct{ prefix, name string }{
	{"ch.qos.logback.", "logback"},
	{"org.apache.logging.log4j.", "log4j"},
	{"org.apache.log4j.", "log4j"},
	{"org.slf4j.", "slf4j"},
	{"java.util.logging.", "java.util.logging"},
	{"sun.util.logging.", "java.util.logging"},
	{"org.jboss.logging.", "jboss-logging"},
	{"org.apache.commons.logging.", "commons-logging"},
}

// DisplayFrame turns async-profiler's JVM-internal names
// ("java/util/ArrayList.grow") into the dotted form Java users read.
func DisplayFrame(f string) string {
	if strings.Contains(f, "/") && !strings.Contains(f, " ") && !strings.HasPrefix(f, "/") {
		return strings.ReplaceAll(f, "/", ".")
	}
	return f
}

func loggingFramework(frames []string) string {
	for i := len(frames) - 1; i >= 0; i-- {
		f := DisplayFrame(frames[i])
		for _, lf := range loggingFrameworks {
			if strings.HasPrefix(f, lf.prefix) {
				return lf.name
			}
		}
	}
	return ""
}

// allocatedType strips the allocation frame's annotation: async-profiler
// ends alloc stacks with the allocated class, marked _[i] (in a new TLAB)
// or _[k] (outside TLABs).
func allocatedType(frame string) (string, bool) {
	for _, suffix := range []string{"_[i]", "_[k]"} {
		if t, ok := strings.CutSuffix(frame, suffix); ok {
			return t, true
		}
	}
	return "", false
}

// Sites ranks allocating frames by weight. Stacks through a logging
// framework are grouped into one row per framework, so the table says what
// logging costs instead of scattering it over formatter internals.
func Sites(p *asprof.Profile, requests int64, top int) ([]evidence.AllocSite, evidence.LoggingCost) {
	logging := evidence.LoggingCost{ByFramework: map[string]int64{}}
	type key struct{ frame, typ, logging string }
	by := map[key]int64{}
	for _, s := range p.Stacks {
		frames := s.Frames
		var k key
		if len(frames) > 0 {
			if t, ok := allocatedType(frames[len(frames)-1]); ok {
				k.typ = DisplayFrame(t)
				frames = frames[:len(frames)-1]
			}
		}
		if fw := loggingFramework(frames); fw != "" {
			logging.Bytes += s.Weight
			logging.ByFramework[fw] += s.Weight
			k = key{frame: "logging: " + fw, logging: fw}
		} else if len(frames) > 0 {
			k.frame = DisplayFrame(frames[len(frames)-1])
		} else {
			k.frame = "(no Java frames)"
		}
		by[k] += s.Weight
	}
	sites := make([]evidence.AllocSite, 0, len(by))
	for k, w := range by {
		site := evidence.AllocSite{Frame: k.frame, Type: k.typ, Bytes: w, Logging: k.logging}
		if p.Total > 0 {
			site.Share = float64(w) / float64(p.Total)
		}
		if requests > 0 {
			site.BytesPerRequest = float64(w) / float64(requests)
		}
		sites = append(sites, site)
	}
	sort.Slice(sites, func(i, j int) bool {
		if sites[i].Bytes != sites[j].Bytes {
			return sites[i].Bytes > sites[j].Bytes
		}
		return sites[i].Frame+sites[i].Type < sites[j].Frame+sites[j].Type
	})
	if top > 0 && len(sites) > top {
		sites = sites[:top]
	}
	if p.Total > 0 {
		logging.Share = float64(logging.Bytes) / float64(p.Total)
	}
	if requests > 0 {
		logging.BytesPerRequest = float64(logging.Bytes) / float64(requests)
	}
	return sites, logging
}
