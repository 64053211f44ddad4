package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
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

// newRecipeFlags registers, on cmd, a flag for each of recipe's
// parameters in params: "name" is --name-with-dashes, "name=flag" renames
// it and "name/x" adds the shorthand -x. Their values complete as
// `recipe run --set` completes them (an enum's values, true or false,
// directories, files).
func newRecipeFlags(cmd *cobra.Command, recipe string, params ...string) *recipeFlags {
	f := cmd.Flags()
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
		cmd.RegisterFlagCompletionFunc(flag, completeParam(r, name))
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
		for _, fl := range added {
			fl.Usage = replaceWord(fl.Usage, name, "--"+rf.flagName(name))
		}
	}
	return rf
}

// replaceWord replaces each whole-word occurrence of word in s, as the
// regular expression \bword\b would at a fraction of the cost: every
// invocation builds every command's flags, and compiling and running a
// regular expression per parameter took half of that.
func replaceWord(s, word, repl string) string {
	isWord := func(b byte) bool {
		return b == '_' || '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'z'
	}
	var out strings.Builder
	from := 0 // s[:from] is written
	for at := 0; ; {
		i := strings.Index(s[at:], word)
		if i < 0 {
			return out.String() + s[from:]
		}
		start, end := at+i, at+i+len(word)
		if (start == 0 || !isWord(s[start-1])) && (end == len(s) || !isWord(s[end])) {
			out.WriteString(s[from:start])
			out.WriteString(repl)
			from = end
		}
		at = end
	}
}

// lateFlags registers a command's recipe flags (register): at once, or
// under Execute only when that command runs (registerLate). Building them
// parses the recipe's YAML, about 0.4 ms each, and every invocation —
// `perfscope version` and shell completion too — builds the whole tree.
func (g *Globals) lateFlags(cmd *cobra.Command, register func()) {
	if g.late == nil {
		register()
		return
	}
	g.late[cmd] = register
}

// registerLate registers the late flags of the command args name, or of
// every command when args name none of them: help and completion
// (commands cobra adds as it executes) and an unknown command, whose
// suggestions and help list every flag.
func (g *Globals) registerLate(root *cobra.Command, args []string) {
	target, _, err := root.Find(args)
	for cmd, register := range g.late {
		if err != nil || cmd == target {
			register()
			delete(g.late, cmd)
		}
	}
}

// completeParam completes the value of recipe r's parameter name.
func completeParam(r *recipes.Recipe, name string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		all, c := r.CompleteSet(name + "=" + toComplete)
		var words []string
		for _, w := range all {
			if w = strings.TrimPrefix(w, name+"="); w != "" { // "": the flag left out
				words = append(words, w)
			}
		}
		return words, completionDirective[c]
	}
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
