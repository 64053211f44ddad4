package recipes

import (
	"github.com/perfscope/perfscope/measure"
)

// Load finds a recipe (a built-in's name or a file), binds set to its
// parameters and checks the plan against the system: what a command, a
// `perfscope recipe run` or a continuous run starts from.
func Load(nameOrFile string, set map[string]string, src measure.Sources) (*Plan, error) {
	r, err := Find(nameOrFile)
	if err != nil {
		return nil, err
	}
	return r.load(set, src)
}

// LoadValues is Load with --set's values as given, a list parameter's
// items once each (Recipe.Values): `perfscope recipe run`'s start.
func LoadValues(nameOrFile string, set map[string][]string, src measure.Sources) (*Plan, error) {
	r, err := Find(nameOrFile)
	if err != nil {
		return nil, err
	}
	values, err := r.Values(set)
	if err != nil {
		return nil, err
	}
	return r.load(values, src)
}

func (r *Recipe) load(set map[string]string, src measure.Sources) (*Plan, error) {
	p, err := r.Bind(set)
	if err != nil {
		return nil, err
	}
	if err := p.Prepare(src); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadBound is Load for a command whose flags are r's parameters
// (Recipe.BindFlags): its sentences name the flags, flags[param] where
// the flag is not --param-with-dashes.
func LoadBound(r *Recipe, set, flags map[string]string, src measure.Sources) (*Plan, error) {
	p, err := r.BindFlags(set, flags)
	if err != nil {
		return nil, err
	}
	if err := p.Prepare(src); err != nil {
		return nil, err
	}
	return p, nil
}
