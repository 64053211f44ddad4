package probes

import (
	"strings"
	"testing"
)

// Every hook is declared once, by one probe, and CatalogHooks hands each
// probe its own in catalog order with the optional flags set there.
func TestCatalogHooks(t *testing.T) {
	seen := map[string]string{}
	for _, e := range Catalog {
		if prev, dup := seen[e.Hook.String()]; dup {
			t.Errorf("%s is declared by %s and %s", e.Hook, prev, e.Probe)
		}
		seen[e.Hook.String()] = e.Probe
		if e.UsedFor == "" {
			t.Errorf("%s: no UsedFor", e.Hook)
		}
	}
	got := CatalogHooks("netqueue")
	if len(got) != 5 || got[0].String() != "napi:napi_poll" || !got[0].Optional || got[1].Optional {
		t.Errorf("netqueue hooks = %+v", got)
	}
	if h := CatalogHook("udpdrop", "kfree_skb"); h.Group != "skb" || !h.Optional {
		t.Errorf("udpdrop kfree_skb = %+v", h)
	}
	for _, f := range []func(){func() { CatalogHooks("nosuch") }, func() { CatalogHook("softirq", "nosuch") }} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "nosuch") {
					t.Errorf("an unknown probe or hook: recovered %v, want a panic naming it", r)
				}
			}()
			f()
		}()
	}
}
