package spec

import "testing"

// A part's needs are its own and those of the probes it uses, each once
// (its own declaration wins: a used probe's need of the same name does
// not make the part list it twice); hooks likewise come along.
func TestAllNeedsAndHooksIncludeUsedProbes(t *testing.T) {
	used := Part{Name: "used", Probe: true,
		Hooks: []Hook{{Group: "g", Name: "used_hook", UsedFor: "x"}},
		Needs: []Need{NeedBPF, NeedHostNet}}
	p := Part{Name: "p", Uses: []*Part{&used},
		Hooks: []Hook{{Group: "g", Name: "own_hook", UsedFor: "y"}},
		Needs: []Need{{Kind: Capability, Name: "CAP_BPF", Required: false, Why: "own"}, NeedPtrace}}
	needs := p.AllNeeds()
	if len(needs) != 3 || needs[0].Why != "own" || needs[1].Name != NeedPtrace.Name || needs[2].Name != HostNetwork {
		t.Errorf("AllNeeds = %+v, want own CAP_BPF, CAP_SYS_PTRACE, then the used probe's hostNetwork", needs)
	}
	hooks := p.AllHooks()
	if len(hooks) != 2 || hooks[0].Name != "own_hook" || hooks[1].Name != "used_hook" {
		t.Errorf("AllHooks = %+v", hooks)
	}
	if !(&Part{Gives: []Input{InputNet}}).Has(InputNet) || (&Part{}).Has(InputNet) {
		t.Error("Has does not follow Gives")
	}
}
