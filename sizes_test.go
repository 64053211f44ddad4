package perfscope_test

// The size ceilings of docs/architecture.md, enforced: no hand-written Go
// file over maxLines lines and no function over maxFuncLines. A file past
// it holds several ideas; split it by concept (one idea per file, named
// for what it holds) rather than raising the ceiling. Tests and generated
// files are exempt.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const maxLines = 800

// oversized lists the files over the ceiling that are being split on other
// branches right now. Remove an entry when its branch merges; the test
// fails on an entry whose file is gone or back under the ceiling, so the
// list cannot go stale.
var oversized = map[string]string{
	// The measuring runtime leaves recipes/ for measure/ and the overhead
	// budget for measure/budget/ (branch s2-measure).
}

// generatedHeader is Go's marker of a generated file
// (https://go.dev/s/generatedcode), on a line before the package clause.
var generatedHeader = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// isGenerated says whether a Go file's source carries the generated
// header before its package clause.
func isGenerated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if generatedHeader.MatchString(line) {
			return true
		}
		if strings.HasPrefix(line, "package ") {
			return false
		}
	}
	return false
}

// handWritten reports whether a Go file counts against the ceiling: not a
// test, not bpf2go's output, not marked generated.
func handWritten(path string, src []byte) bool {
	name := filepath.Base(path)
	for _, suffix := range []string{"_test.go", "_bpfel.go", "_bpfeb.go"} {
		if strings.HasSuffix(name, suffix) {
			return false
		}
	}
	return !isGenerated(src)
}

// goFileLines counts the lines of every hand-written Go file below the
// repository root, by slash path. Folders the go command ignores (testdata,
// vendor, names starting with "." or "_") are skipped.
func goFileLines(t *testing.T) map[string]int {
	t.Helper()
	lines := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if handWritten(path, src) {
			n := bytes.Count(src, []byte("\n"))
			if len(src) > 0 && src[len(src)-1] != '\n' {
				n++
			}
			lines[filepath.ToSlash(path)] = n
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the repository: %v", err)
	}
	if len(lines) == 0 {
		t.Fatal("found no hand-written Go file: is the test running at the repository root?")
	}
	return lines
}

// TestFileSizes fails on every hand-written Go file over maxLines lines
// that is not in oversized, and on every oversized entry whose file is
// gone or no longer over the ceiling.
func TestFileSizes(t *testing.T) {
	checkCeiling(t, goFileLines(t), maxLines, oversized, "oversized", "hand-written Go files", "split each by concept")
}

// funcName is a function's name, a method's with its receiver's type
// ("Session.Measure"): methods of two types may share a name.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// checkCeiling fails on every entry of sizes over max that listed does not
// name, and on every listed entry that is gone or no longer over it: what
// the ceiling is for ("hand-written Go files"), how to get under it, and
// the list's name in this file go into the messages.
func checkCeiling(t *testing.T, sizes map[string]int, max int, listed map[string]string, list, what, fix string) {
	t.Helper()
	var over, stale []string
	for name, n := range sizes {
		if _, ok := listed[name]; n > max && !ok {
			over = append(over, fmt.Sprintf("%s: %d lines", name, n))
		}
	}
	for name, why := range listed {
		if n, ok := sizes[name]; !ok || n <= max {
			stale = append(stale, fmt.Sprintf("%s (%s) is gone or within %d lines", name, why, max))
		}
	}
	sort.Strings(over)
	sort.Strings(stale)
	if len(over) > 0 {
		t.Errorf("%d %s are over %d lines: %s (docs/architecture.md, \"Sizes\"):\n  %s", len(over), what, max, fix, strings.Join(over, "\n  "))
	}
	if len(stale) > 0 {
		t.Errorf("remove these entries from %s in sizes_test.go:\n  %s", list, strings.Join(stale, "\n  "))
	}
}

// TestHandWritten pins what the ceiling exempts.
func TestHandWritten(t *testing.T) {
	for _, c := range []struct {
		path, src string
		want      bool
	}{
		{"jvm/measure.go", "// Package jvm measures a JVM.\npackage jvm\n", true},
		{"jvm/measure_test.go", "package jvm\n", false},
		{"probes/udpsock/udpsock_bpfel.go", "package udpsock\n", false},
		{"probes/udpsock/udpsock_bpfeb.go", "package udpsock\n", false},
		{"x/gen.go", "// Code generated by stringer; DO NOT EDIT.\n\npackage x\n", false},
		{"x/gen2.go", "//go:build linux\n\n// Code generated by tool. DO NOT EDIT.\npackage x\n", false},
		// The marker counts only before the package clause, as a whole line.
		{"x/late.go", "package x\n\n// Code generated by tool. DO NOT EDIT.\n", true},
		{"x/quoted.go", "// This file is not \"Code generated ... DO NOT EDIT.\"\npackage x\n", true},
	} {
		if got := handWritten(c.path, []byte(c.src)); got != c.want {
			t.Errorf("handWritten(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}

// maxFuncLines is the length, func keyword to closing brace, past which a
// hand-written function is split where it does several things
// (docs/architecture.md, "Sizes"): a function that long is read as a
// sequence of steps, and each step reads better named.
const maxFuncLines = 125

// longFuncs lists the functions over maxFuncLines being split right now,
// by "path:name"; the test fails on an entry that is gone or back under.
var longFuncs = map[string]string{}

// TestFuncSizes fails on every hand-written function over maxFuncLines
// lines that is not in longFuncs, and on every stale longFuncs entry.
func TestFuncSizes(t *testing.T) {
	fset := token.NewFileSet()
	sizes := map[string]int{}
	for path := range goFileLines(t) {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				sizes[path+":"+funcName(fd)] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			}
		}
	}
	checkCeiling(t, sizes, maxFuncLines, longFuncs, "longFuncs", "hand-written functions", "split each into its steps")
}
