package cli

import (
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/perfscope/perfscope/measure"
	"github.com/perfscope/perfscope/recipes"
	"github.com/perfscope/perfscope/spec"
)

// recipeFlags are a built-in recipe's parameters as a command's flags
// (perfscope softirq follows softirq-balance, offcpu follows offcpu, …).
// Each flag takes its type, default and help from its parameter, which is
// the one place they are written; its value is checked when the recipe is
// bound and prepared (load), in sentences that name the flag.
type recipeFlags struct {
	recipe *recipes.Recipe
	fs     *pflag.FlagSet
	// flag names the parameters whose flag is not --param-with-dashes.
	flag map[string]string
	// set are the values the command sets itself, from flags of its own
	// (profile's --kernel-only is stacks=kernel).
	set map[string]string
}

// paramText is one parameter flag's value, as typed: a list's flag
// given more than once is its items, one per occurrence.
type paramText struct {
	text  string
	kind  spec.Kind
	items []string
}

func (v *paramText) String() string { return v.text }
func (v *paramText) Set(s string) error {
	if v.kind.IsList() {
		v.items = append(v.items, s)
		s = v.kind.JoinItems(v.items)
	}
	v.text = s
	return nil
}
func (v *paramText) Type() string {
	if v.kind == spec.KindEnum {
		return "string"
	}
	return string(v.kind)
}

// newRecipeFlags registers, on f, a flag for each of recipe's parameters
// in params: "name" is --name-with-dashes, "name=flag" renames it and
// "name/x" adds the shorthand -x.
func newRecipeFlags(f *pflag.FlagSet, recipe string, params ...string) *recipeFlags {
	r, err := recipes.Find(recipe)
	if err != nil {
		panic("built-in recipe " + recipe + ": " + err.Error()) // the tests run every command
	}
	rf := &recipeFlags{recipe: r, fs: f, flag: map[string]string{}, set: map[string]string{}}
	var added []*pflag.Flag
	for _, p := range params {
		p, short, _ := strings.Cut(p, "/")
		name, flag, renamed := strings.Cut(p, "=")
		if !renamed {
			flag = strings.ReplaceAll(name, "_", "-")
		} else {
			rf.flag[name] = "--" + flag
		}
		param, ok := r.Parameter(name)
		if !ok {
			panic("built-in recipe " + recipe + " has no parameter " + name)
		}
		v := &paramText{kind: param.Kind}
		if param.Default != nil {
			v.text = param.Format(param.Default)
		}
		fl := f.VarPF(v, flag, short, param.Description)
		added = append(added, fl)
		if param.Kind == spec.KindBool {
			fl.NoOptDefVal = "true"
		}
		if param.Required {
			fl.Usage += " (required)"
		}
		if param.Kind.IsList() {
			fl.Usage += " (repeatable)"
		}
		if param.Kind == spec.KindEnum && !strings.Contains(fl.Usage, param.Values[len(param.Values)-1]) {
			values := slices.DeleteFunc(slices.Clone(param.Values), func(v string) bool { return v == "" })
			fl.Usage += ": " + strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
		}
	}
	// The descriptions name each other as a recipe does (requests_from);
	// the help names the flags.
	for _, p := range params {
		name, _, _ := strings.Cut(strings.Split(p, "/")[0], "=")
		if !strings.Contains(name, "_") {
			continue
		}
		word := regexp.MustCompile(`\b` + name + `\b`)
		for _, fl := range added {
			fl.Usage = word.ReplaceAllString(fl.Usage, "--"+rf.flagName(name))
		}
	}
	return rf
}

// flagName is a parameter's flag, without the dashes.
func (rf *recipeFlags) flagName(param string) string {
	if f, ok := rf.flag[param]; ok {
		return strings.TrimPrefix(f, "--")
	}
	return strings.ReplaceAll(param, "_", "-")
}

// value is a parameter's flag as typed, or its default.
func (rf *recipeFlags) value(param string) string {
	return rf.fs.Lookup(rf.flagName(param)).Value.String()
}

// showDefault makes text a parameter flag's default, shown and read when
// it is not given; the command says what it means (--alloc-interval auto).
func (rf *recipeFlags) showDefault(param, text string) {
	f := rf.fs.Lookup(rf.flagName(param))
	f.DefValue, f.Value.(*paramText).text = text, text
}

// load binds the recipe to the flags given and to the command's own
// values (set), and prepares it against src: every refusal is one
// sentence naming a flag, bad input.
func (rf *recipeFlags) load(src measure.Sources) (*recipes.Plan, error) {
	set := map[string]string{}
	for _, p := range rf.recipe.Parameters {
		f := rf.fs.Lookup(rf.flagName(p.Name))
		if f == nil {
			continue
		}
		if _, ours := f.Value.(*paramText); ours && f.Changed {
			set[p.Name] = f.Value.String()
		}
	}
	for k, v := range rf.set {
		set[k] = v
	}
	return recipes.LoadBound(rf.recipe, set, rf.flag, src)
}
