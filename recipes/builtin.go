package recipes

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
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

// Builtins are the built-in recipes, by name. A built-in that does not
// parse is a bug the tests catch; it panics here rather than ship.
var Builtins = sync.OnceValue(func() []*Recipe {
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		panic(err)
	}
	var out []*Recipe
	for _, e := range entries {
		file := path.Join("builtin", e.Name())
		data, err := builtinFS.ReadFile(file)
		if err != nil {
			panic(err)
		}
		r, err := Parse(file, data)
		if err != nil {
			panic(fmt.Sprintf("built-in recipe %s: %v", file, err))
		}
		if r.Name+".yaml" != e.Name() {
			panic(fmt.Sprintf("built-in recipe %s is named %s", file, r.Name))
		}
		r.Source = "builtin"
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
})

// Builtin is the built-in recipe of that name.
func Builtin(name string) (*Recipe, bool) {
	for _, r := range Builtins() {
		if r.Name == name {
			return r, true
		}
	}
	return nil, false
}

// BuiltinNames lists the built-ins' names.
func BuiltinNames() []string {
	var out []string
	for _, r := range Builtins() {
		out = append(out, r.Name)
	}
	return out
}

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
