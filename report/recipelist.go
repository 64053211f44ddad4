package report

import (
	"fmt"
	"io"
	"strings"
)

// RecipeInfo is a recipe as `perfscope recipe show -o json` and `recipe
// list` print it.
type RecipeInfo struct {
	Name        string            `json:"name"`
	Source      string            `json:"source"`
	Summary     string            `json:"summary"`
	Description string            `json:"description"`
	Parameters  []RecipeParameter `json:"parameters"`
	Probes      []string          `json:"probes"`
	Collectors  []string          `json:"collectors"`
}

// RecipeParameter is one of a recipe's parameters.
type RecipeParameter struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Default     *string  `json:"default,omitempty"`
	Required    bool     `json:"required,omitempty"`
	Values      []string `json:"values,omitempty"`
	Description string   `json:"description,omitempty"`
}

// RecipeList is `perfscope recipe list`'s data.
type RecipeList struct {
	Recipes []RecipeInfo `json:"recipes"`
}

// WriteText implements Texter: one row per recipe.
func (l RecipeList) WriteText(w io.Writer, _ *Report) error {
	t := Table{Header: []string{"recipe", "what it measures", "parameters"}}
	for _, r := range l.Recipes {
		var ps []string
		for _, p := range r.Parameters {
			n := p.Name
			if p.Required {
				n += "*"
			}
			ps = append(ps, n)
		}
		t.Add(r.Name, r.Summary, strings.Join(ps, " "))
	}
	t.Write(w)
	fmt.Fprintln(w, "\n* required. `perfscope recipe show NAME` prints a recipe; `perfscope recipe run NAME --set name=value` runs it.")
	return nil
}

// RecipeValidation is the data of `perfscope recipe validate`.
type RecipeValidation struct {
	Files []RecipeFileCheck `json:"files"`
}

// RecipeFileCheck is one validated file: its recipe, or its errors.
type RecipeFileCheck struct {
	File   string        `json:"file"`
	Recipe string        `json:"recipe,omitempty"`
	Errors []RecipeError `json:"errors"`
}

// RecipeError is one problem in a recipe file.
type RecipeError struct {
	Line    int    `json:"line"`
	Path    string `json:"path"`
	Message string `json:"message"`
	// Text is the error as the recipe language words it (file:line:
	// path: message); not part of the JSON.
	Text string `json:"-"`
}

// WriteText implements Texter: "FILE: ok", or each error on its line.
func (v RecipeValidation) WriteText(w io.Writer, _ *Report) error {
	for _, f := range v.Files {
		if len(f.Errors) == 0 {
			fmt.Fprintf(w, "%s: ok (recipe %s)\n", f.File, f.Recipe)
			continue
		}
		for _, e := range f.Errors {
			fmt.Fprintln(w, e.Text)
		}
	}
	return nil
}

// RecipeCatalog is the data of `perfscope recipe catalog`: what a
// recipe can name.
type RecipeCatalog struct {
	Probes     []RecipePart `json:"probes"`
	Collectors []RecipePart `json:"collectors"`
	Rules      []RecipeRule `json:"rules"`
	Types      []string     `json:"parameter_types"`
}

// RecipePart is a probe or collector a recipe can name.
type RecipePart struct {
	Name    string         `json:"name"`
	Doc     string         `json:"description"`
	Options []RecipeOption `json:"options"`
}

// RecipeOption is one of a part's options.
type RecipeOption struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Default  string `json:"default,omitempty"`
	Required bool   `json:"required,omitempty"`
	Doc      string `json:"description"`
}

// RecipeRule is a rule a recipe can select.
type RecipeRule struct {
	ID         string            `json:"id"`
	Family     string            `json:"family"`
	Judges     string            `json:"judges"`
	Thresholds []RecipeThreshold `json:"thresholds,omitempty"`
}

// RecipeThreshold is one of a rule's tunable thresholds.
type RecipeThreshold struct {
	Name    string  `json:"name"`
	Default float64 `json:"default"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Doc     string  `json:"description"`
}

// WriteText implements Texter.
func (c RecipeCatalog) WriteText(w io.Writer, _ *Report) error {
	for _, group := range []struct {
		title string
		list  []RecipePart
	}{{"Probes", c.Probes}, {"Collectors", c.Collectors}} {
		Heading(w, group.title)
		for _, comp := range group.list {
			fmt.Fprintf(w, "%s — %s\n", comp.Name, comp.Doc)
			for _, o := range comp.Options {
				def := ""
				switch {
				case o.Required:
					def = " (required)"
				case o.Default != "":
					def = " (default " + o.Default + ")"
				}
				fmt.Fprintf(w, "    %-18s %s%s: %s\n", o.Name, o.Want, def, o.Doc)
			}
		}
	}
	Heading(w, "Rules (select by id or family)")
	t := Table{Header: []string{"id", "judges", "thresholds"}}
	for _, r := range c.Rules {
		var th []string
		for _, x := range r.Thresholds {
			th = append(th, fmt.Sprintf("%s=%g", x.Name, x.Default))
		}
		t.Add(r.ID, r.Judges, strings.Join(th, " "))
	}
	t.Write(w)
	fmt.Fprintf(w, "\nParameter types: %s\n", strings.Join(c.Types, ", "))
	return nil
}
