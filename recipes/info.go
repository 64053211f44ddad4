package recipes

import (
	"errors"
	"strings"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/report"
)

// Info is what `perfscope recipe list` and `recipe show -o json` print of
// a recipe: its name, summary, parameters and parts.
func Info(r *Recipe) report.RecipeInfo {
	ri := report.RecipeInfo{Name: r.Name, Source: r.Source, Summary: r.Summary(), Description: r.Description, Parameters: []report.RecipeParameter{}, Probes: []string{}, Collectors: []string{}}
	for _, p := range r.Parameters {
		pi := report.RecipeParameter{Name: p.Name, Type: string(p.Kind), Required: p.Required, Values: p.Values, Description: p.Description}
		if d, ok := p.DefaultText(); ok {
			pi.Default = &d
		}
		ri.Parameters = append(ri.Parameters, pi)
	}
	for _, u := range r.Probes {
		ri.Probes = append(ri.Probes, u.Name)
	}
	for _, u := range r.Collectors {
		ri.Collectors = append(ri.Collectors, u.Name)
	}
	return ri
}

// List is the built-in recipes' Info.
func List() report.RecipeList {
	var l report.RecipeList
	for _, r := range Builtins() {
		l.Recipes = append(l.Recipes, Info(r))
	}
	return l
}

// Validate reads each recipe file and collects every error with its line
// and field; bad is how many files have errors.
func Validate(files []string) (v report.RecipeValidation, bad int) {
	for _, file := range files {
		vf := report.RecipeFileCheck{File: file, Errors: []report.RecipeError{}}
		r, err := ReadFile(file)
		var fes Errors
		switch {
		case errors.As(err, &fes):
			for _, e := range fes {
				vf.Errors = append(vf.Errors, report.RecipeError{Line: e.Line, Path: e.Path, Message: e.Msg, Text: FieldError{File: file, Line: e.Line, Path: e.Path, Msg: e.Msg}.Error()})
			}
		case err != nil:
			vf.Errors = append(vf.Errors, report.RecipeError{Message: err.Error(), Text: FieldError{File: file, Msg: err.Error()}.Error()})
		default:
			vf.Recipe = r.Name
		}
		if len(vf.Errors) > 0 {
			bad++
		}
		v.Files = append(v.Files, vf)
	}
	return v, bad
}

// Catalog is what a recipe can name: the probes and collectors with their
// options, the rules with their thresholds, the parameter types.
func Catalog() report.RecipeCatalog {
	var c report.RecipeCatalog
	for _, group := range []struct {
		list []Component
		out  *[]report.RecipePart
	}{{Probes, &c.Probes}, {Collectors, &c.Collectors}} {
		for _, comp := range group.list {
			ci := report.RecipePart{Name: comp.Name, Doc: comp.Doc, Options: []report.RecipeOption{}}
			for _, o := range comp.Options {
				ci.Options = append(ci.Options, report.RecipeOption{Name: o.Name, Want: o.Want(), Default: o.DefaultText(), Required: o.Required, Doc: o.Doc})
			}
			*group.out = append(*group.out, ci)
		}
	}
	for _, r := range Rules() {
		ri := report.RecipeRule{ID: r.ID, Family: r.Family, Judges: r.Judges}
		for _, t := range r.Thresholds {
			ri.Thresholds = append(ri.Thresholds, report.RecipeThreshold{Name: t.Name, Default: t.Default, Min: t.Min, Max: t.Max, Doc: t.Doc})
		}
		c.Rules = append(c.Rules, ri)
	}
	for _, k := range Kinds {
		c.Types = append(c.Types, string(k))
	}
	return c
}

// Values joins repeated --set values into r's parameters: the items of a
// list parameter given once each, any other parameter once.
func (r *Recipe) Values(set map[string][]string) (map[string]string, error) {
	out := map[string]string{}
	for name, vs := range set {
		p, ok := r.Parameter(name)
		switch {
		case len(vs) > 1 && ok && p.Kind.IsList():
			out[name] = p.Kind.JoinItems(vs)
		case len(vs) > 1:
			return nil, measure.BadInput("--set %s is given twice", name)
		default:
			out[name] = vs[0]
		}
	}
	return out, nil
}

// Completion says what a shell completes a --set word with.
type Completion int

const (
	// CompleteWords: the words given, and nothing else.
	CompleteWords Completion = iota
	// CompleteNames: the parameters as NAME=, no space after.
	CompleteNames
	// CompleteDirs and CompleteFiles: a path.
	CompleteDirs
	CompleteFiles
)

// CompleteSet is what `recipe run NAME --set word` completes to: the
// parameters as NAME= (with their descriptions) before the =, and after
// it an enum's or a bool's values, or a path.
func (r *Recipe) CompleteSet(word string) ([]string, Completion) {
	name, _, ok := strings.Cut(word, "=")
	if !ok {
		var out []string
		for _, p := range r.Parameters {
			out = append(out, p.Name+"=\t"+p.Description)
		}
		return out, CompleteNames
	}
	p, found := r.Parameter(name)
	if !found {
		return nil, CompleteWords
	}
	values := p.Values
	switch p.Kind {
	case KindBool:
		values = []string{"true", "false"}
	case KindDir:
		return nil, CompleteDirs
	case KindFile, KindFiles:
		return nil, CompleteFiles
	}
	var out []string
	for _, v := range values {
		out = append(out, name+"="+v)
	}
	return out, CompleteWords
}
