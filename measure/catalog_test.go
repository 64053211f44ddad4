package measure_test

import (
	"strings"
	"testing"

	"github.com/perfscope/perfscope/internal/testutil"
	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/probes"
	"github.com/perfscope/perfscope/probes/netqueue"
	"github.com/perfscope/perfscope/probes/udpdrop"
)

// Every part is declared once, each of its hooks once with what it is
// used for, every recipe part says what it needs, and every input a part
// gives or a reference it names is one the rest of perfscope knows.
func TestCatalogSpecs(t *testing.T) {
	names := map[string]bool{}
	hooks := map[string]string{} // "probe hook"
	for _, p := range measure.Catalog {
		if names[p.Name] {
			t.Errorf("part %s is in the catalog twice", p.Name)
		}
		names[p.Name] = true
		if p.Doc == "" {
			t.Errorf("%s: no Doc", p.Name)
		}
		for _, h := range p.Hooks {
			// Two probes may attach programs of their own to one
			// tracepoint (udpsock and tcpevents to sock:sk_data_ready);
			// one probe declares each hook once.
			key := p.Name + " " + h.String()
			if _, dup := hooks[key]; dup {
				t.Errorf("%s declares %s twice", p.Name, h)
			}
			hooks[key] = p.Name
			if h.UsedFor == "" {
				t.Errorf("%s: no UsedFor", h)
			}
		}
		if p.Recipe && len(p.AllNeeds()) == 0 {
			t.Errorf("recipe part %s declares no needs", p.Name)
		}
		if p.Recipe && p.Section == "" {
			t.Errorf("recipe part %s has no report section", p.Name)
		}
		for _, u := range p.Uses {
			if !names[u.Name] {
				if _, ok := measure.CatalogPart(u.Name); !ok {
					t.Errorf("%s uses %s, which is not in the catalog", p.Name, u.Name)
				}
			}
		}
	}
	if got := netqueue.Hooks; len(got) != 5 || got[0].String() != "napi:napi_poll" || !got[0].Optional || got[1].Optional {
		t.Errorf("netqueue hooks = %+v", got)
	}
	if h := udpdrop.Spec.Hook("kfree_skb"); h.Group != "skb" || !h.Optional {
		t.Errorf("udpdrop kfree_skb = %+v", h)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "nosuch") {
				t.Errorf("an unknown hook: recovered %v, want a panic naming it", r)
			}
		}()
		udpdrop.Spec.Hook("nosuch")
	}()
	if len(measure.CatalogHooks()) != len(hooks) {
		t.Errorf("CatalogHooks lists %d hooks, the specs declare %d", len(measure.CatalogHooks()), len(hooks))
	}
}

// Every tracepoint the catalog names exists in this kernel's BTF.
func TestCatalogTracepointsExist(t *testing.T) {
	testutil.RequireRoot(t)
	checks, err := probes.CheckTracepoints(measure.CatalogHooks())
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	for _, c := range checks {
		if !c.InBTF {
			t.Errorf("%s not in kernel BTF", c.Hook)
		}
	}
}
