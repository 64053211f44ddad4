package jvm

import (
	"testing"

	"github.com/perfscope/perfscope/jvm/asprof"
)

func TestSitesGroupLogging(t *testing.T) {
	p := &asprof.Profile{Event: asprof.Alloc, Total: 1000, Stacks: []asprof.Stack{
		{Frames: []string{"Thread.run", "App.handle", "App.alloc", "byte[]_[i]"}, Weight: 600},
		{Frames: []string{"Thread.run", "App.handle", "org/slf4j/Logger.info", "ch/qos/logback/classic/Logger.info", "java/lang/StringBuilder.toString", "java.lang.String_[k]"}, Weight: 250},
		{Frames: []string{"Thread.run", "App.log", "java/util/logging/Logger.log", "char[]_[i]"}, Weight: 150},
	}}
	sites, logging := Sites(p, 10, 0)
	if logging.Bytes != 400 || logging.ByFramework["logback"] != 250 || logging.ByFramework["java.util.logging"] != 150 || logging.BytesPerRequest != 40 {
		t.Fatalf("logging %+v", logging)
	}
	if len(sites) != 3 || sites[0].Frame != "App.alloc" || sites[0].Type != "byte[]" || sites[0].BytesPerRequest != 60 {
		t.Fatalf("sites %+v", sites)
	}
	if sites[1].Frame != "logging: logback" || sites[1].Logging != "logback" {
		t.Errorf("slf4j over logback is charged to logback: %+v", sites[1])
	}
	if top, _ := Sites(p, 0, 1); len(top) != 1 || top[0].BytesPerRequest != 0 {
		t.Errorf("top 1 without requests: %+v", top)
	}
}

func TestParseFlags(t *testing.T) {
	r, m := parseFlags("-XX:G1HeapRegionSize=1048576 -XX:MaxHeapSize=134217728 -XX:+UseG1GC")
	if r != 1<<20 || m != 128<<20 {
		t.Errorf("region %d max heap %d", r, m)
	}
}
