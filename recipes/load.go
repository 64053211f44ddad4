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
	p, err := r.Bind(set)
	if err != nil {
		return nil, err
	}
	if err := p.Prepare(src); err != nil {
		return nil, err
	}
	return p, nil
}
