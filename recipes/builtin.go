package recipes

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/perfscope/perfscope/measure"
)

// The built-in recipes, embedded in the binary. `perfscope udp`,
// `softirq`, `profile` and `offcpu` follow udp-rx, softirq-balance,
// cpu-profile and offcpu.
//
//go:embed builtin/*.yaml
var builtinFS embed.FS

// builtinNames are the built-ins' names, from their files' names (a
// built-in is named after its file: Builtin checks), in order.
var builtinNames = sync.OnceValue(func() []string {
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		panic(err)
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
})

// builtins caches each built-in once parsed: a command parses the one
// recipe it runs, not all of them (a tenth of the CPU a short
// `perfscope udp` spent before its probes loaded went to parsing every
// built-in for the doctor command's help text).
var builtins sync.Map // name → *Recipe

// Builtins are the built-in recipes, by name. A built-in that does not
// parse is a bug the tests catch; it panics here rather than ship.
func Builtins() []*Recipe {
	var out []*Recipe
	for _, name := range builtinNames() {
		r, _ := Builtin(name)
		out = append(out, r)
	}
	return out
}

// Builtin is the built-in recipe of that name, parsed on first use.
func Builtin(name string) (*Recipe, bool) {
	if r, ok := builtins.Load(name); ok {
		return r.(*Recipe), true
	}
	if !slices.Contains(builtinNames(), name) {
		return nil, false
	}
	file := path.Join("builtin", name+".yaml")
	data, err := builtinFS.ReadFile(file)
	if err != nil {
		panic(err)
	}
	r, err := Parse(file, data)
	if err != nil {
		panic(fmt.Sprintf("built-in recipe %s: %v", file, err))
	}
	if r.Name != name {
		panic(fmt.Sprintf("built-in recipe %s is named %s", file, r.Name))
	}
	r.Source = "builtin"
	got, _ := builtins.LoadOrStore(name, r)
	return got.(*Recipe), true
}

// BuiltinNames lists the built-ins' names.
func BuiltinNames() []string { return slices.Clone(builtinNames()) }

// Find is the built-in recipe of that name, else the recipe in that file.
func Find(nameOrFile string) (*Recipe, error) {
	if r, ok := Builtin(nameOrFile); ok {
		return r, nil
	}
	r, err := ReadFile(nameOrFile)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrFile, "/.") {
		return nil, measure.BadInput("no built-in recipe %q and no such file (built-ins: %s)", nameOrFile, strings.Join(BuiltinNames(), ", "))
	}
	return r, err
}

// ReadFile reads and parses a recipe file (at most MaxRecipeBytes).
func ReadFile(file string) (*Recipe, error) {
	// A FIFO or device would block or never end: only regular files
	// (through links) are recipes.
	if st, err := os.Stat(file); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, measure.BadInput("recipe %s is not a regular file", file)
	}
	f, err := os.Open(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the sentence already
		}
		return nil, measure.MarkBadInput(fmt.Errorf("recipe %s: %w", file, err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && st.IsDir() {
		return nil, measure.BadInput("recipe %s is a directory: name a .yaml file", file)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxRecipeBytes+1))
	if err != nil {
		return nil, measure.BadInput("recipe %s: %v", file, err)
	}
	if len(data) > MaxRecipeBytes {
		// Only the cap and one byte were read: the size is the file's.
		size := fmt.Sprintf("more than %d bytes", MaxRecipeBytes)
		if st != nil && st.Size() > MaxRecipeBytes {
			size = fmt.Sprintf("%d bytes", st.Size())
		}
		d := &decoder{file: file}
		d.errorf(0, "", "a recipe is at most %d KiB, this file has %s", MaxRecipeBytes>>10, size)
		return nil, d.errs.sorted()
	}
	return Parse(file, data)
}
