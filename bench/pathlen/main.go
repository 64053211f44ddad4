// Command pathlen measures how far a reader travels following a command
// through perfscope: a depth-first walk of the static call graph from the
// given functions through the project's own code (each function expanded
// once, callees in source order), printing the walk and counting the
// functions, the files they live in, the steps into another file, and the
// climbs back into a caller's file to go on elsewhere (README,
// "What it takes, measured"). It is its own module so that perfscope does
// not depend on golang.org/x/tools.
//
//	go run . ../.. 'internal/cli.(udpOptions).validate,internal/cli.runUDP' \
//	    collectors/ probes jvm/attach jvm/asprof base/httpload flame diagnose \
//	    apply report/compare base/safeio report
//
// The first argument is the tree, the second the functions (package path
// below the module, then the function), the rest package path fragments
// not followed.
package main

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/static"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: pathlen TREE PKG.FUNC[,PKG.FUNC...] [EXCLUDED-PACKAGE-FRAGMENT...]")
		os.Exit(2)
	}
	dir, root := os.Args[1], os.Args[2]
	exclude := os.Args[3:]
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	cfg := &packages.Config{Mode: packages.LoadAllSyntax, Dir: dir}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		panic(err)
	}
	prog, _ := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	prog.Build()
	cg := static.CallGraph(prog)
	const mod = "github.com/perfscope/perfscope/"
	var starts []*ssa.Function
	for _, r := range strings.Split(root, ",") {
		var start *ssa.Function
		for f := range cg.Nodes {
			if f != nil && f.Pkg != nil && strings.TrimPrefix(f.Pkg.Pkg.Path(), mod)+"."+funcName(f) == r {
				start = f
			}
		}
		if start == nil {
			panic("no function " + r)
		}
		starts = append(starts, start)
	}
	fset := prog.Fset
	fileOf := func(f *ssa.Function) string {
		if f.Pos() == token.NoPos {
			return ""
		}
		return strings.TrimPrefix(fset.Position(f.Pos()).Filename, dir+"/")
	}
	ours := func(f *ssa.Function) bool {
		if f == nil || f.Pkg == nil || !strings.HasPrefix(f.Pkg.Pkg.Path(), mod) || strings.HasSuffix(fileOf(f), "_test.go") {
			return false
		}
		for _, x := range exclude {
			if strings.Contains(f.Pkg.Pkg.Path(), x) {
				return false
			}
		}
		return true
	}
	seen := map[*ssa.Function]bool{}
	files := map[string]bool{}
	var funcs []string
	steps, climbs := 0, 0
	var walk func(f *ssa.Function, depth int)
	walk = func(f *ssa.Function, depth int) {
		seen[f] = true
		file := fileOf(f)
		files[file] = true
		funcs = append(funcs, strings.Repeat("  ", depth)+funcName(f)+"  ("+file+")")
		var out []*callgraph.Edge
		for _, e := range cg.Nodes[f].Out {
			if ours(e.Callee.Func) && !seen[e.Callee.Func] {
				out = append(out, e)
			}
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].Pos() < out[j].Pos() })
		for i, e := range out {
			if seen[e.Callee.Func] {
				continue
			}
			cf := fileOf(e.Callee.Func)
			if cf != file {
				steps++ // into another file
			}
			walk(e.Callee.Func, depth+1)
			if cf != file && i < len(out)-1 {
				climbs++ // back in this file, to go on elsewhere
			}
		}
	}
	for _, start := range starts {
		walk(start, 0)
	}
	for _, l := range funcs {
		fmt.Println(l)
	}
	fmt.Printf("%s: %d functions in %d files; %d steps into another file, %d climbs back to go on\n", root, len(funcs), len(files), steps, climbs)
}

func funcName(f *ssa.Function) string {
	if r := f.Signature.Recv(); r != nil {
		t := r.Type().String()
		t = t[strings.LastIndex(t, ".")+1:]
		return "(" + strings.TrimPrefix(t, "*") + ")." + f.Name()
	}
	return f.Name()
}
