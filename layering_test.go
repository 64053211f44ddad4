package perfscope_test

// The floors of docs/architecture.md, enforced. An import points down a
// floor or along it, never up: a utility that imports the CLI, a probe
// that imports a rule or a collector that imports the lab would tie the
// lower layer to everything above it. Only shipped code is checked; a
// test may drive a lower package with a higher one (a probe's test floods
// a socket with the lab's udpflood to cause the events it counts).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/perfscope/perfscope"

// floors lists the floors from the top. A package belongs to the floor of
// the longest prefix naming it; a package no prefix names fails the test,
// so a new top-level folder gets a place here (and in
// docs/architecture.md) before it lands.
var floors = []struct {
	name     string
	prefixes []string
}{
	// never imported by shipped code; measure/replay replays recorded runs
	// for measure's and recipes' tests
	{"tests", []string{"integration", "bench", "measure/replay"}},
	{"cmd", []string{"cmd"}},
	{"internal", []string{"internal"}}, // the CLI, serve, test helpers
	{"recipes", []string{"recipes", "privilege"}},
	{"measure", []string{"measure"}},
	{"budget", []string{"measure/budget"}}, // the overhead budget: governs probes, knows no part
	{"lab", []string{"lab"}},
	{"apply", []string{"apply"}},
	{"report", []string{"report"}},
	{"diagnose", []string{"diagnose"}},
	{"runtimes", []string{"jvm", "golang", "offcpu"}}, // a target measured whole: a JVM, a Go service, threads off CPU
	{"probes", []string{"probes"}},
	// spec is the vocabulary of one spec per part (options and their
	// domains, hooks, container needs, budget references, rules' inputs):
	// the probes declare theirs with it, everything above reads them.
	{"spec", []string{"spec"}},
	{"collectors", []string{"collectors"}},
	// evidence sits under collectors: it is the vocabulary of a run that
	// every floor above speaks, collectors included (cgroup attribution
	// fills evidence.Workload), and so it can import no collector.
	{"evidence", []string{"evidence"}},
	{"flame", []string{"flame"}},
	{"base", []string{"base"}},
}

// floorOf returns the floor index (0 is the top) of a package path
// relative to the module, or -1.
func floorOf(rel string) int {
	best, bestLen := -1, -1
	for i, f := range floors {
		for _, p := range f.prefixes {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

type listedPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
}

// modulePackages lists the module's packages with `go list`: it applies
// the build constraints the shipped binary is built with.
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering check needs the go command: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Dir,GoFiles,CgoFiles,TestGoFiles,XTestGoFiles", "./...")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(&stdout)
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list ./... named no package")
	}
	return pkgs
}

// fileImports returns the import paths of one Go file.
func fileImports(t *testing.T, fset *token.FileSet, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("parse imports of %s: %v", path, err)
	}
	var out []string
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", path, spec.Path.Value, err)
		}
		out = append(out, p)
	}
	return out
}

// TestFloors fails on every shipped file that imports a package on a
// higher floor or internal/testutil, on every package that is on no floor,
// and on any file outside probes/ that imports cilium/ebpf (tests
// included: a test that needs BPF goes through a probe package).
func TestFloors(t *testing.T) {
	fset := token.NewFileSet()
	var upward, unplaced, ebpf, helpers []string
	for _, p := range modulePackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		shipped := append(append([]string{}, p.GoFiles...), p.CgoFiles...)
		tests := append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...)
		from := floorOf(rel)
		if from < 0 && len(shipped) > 0 {
			unplaced = append(unplaced, rel)
		}
		for _, name := range append(shipped, tests...) {
			file := filepath.Join(p.Dir, name)
			fileRel := filepath.ToSlash(filepath.Join(rel, name))
			isTest := strings.HasSuffix(name, "_test.go")
			for _, imp := range fileImports(t, fset, file) {
				if (imp == "github.com/cilium/ebpf" || strings.HasPrefix(imp, "github.com/cilium/ebpf/")) &&
					rel != "probes" && !strings.HasPrefix(rel, "probes/") {
					ebpf = append(ebpf, fmt.Sprintf("%s imports %s", fileRel, imp))
				}
				if isTest || from < 0 || !strings.HasPrefix(imp, module+"/") {
					continue
				}
				if imp == module+"/internal/testutil" && floors[from].name != "tests" {
					helpers = append(helpers, fmt.Sprintf("%s imports %s", fileRel, imp))
				}
				impRel := strings.TrimPrefix(imp, module+"/")
				to := floorOf(impRel)
				if to >= 0 && to < from {
					upward = append(upward, fmt.Sprintf("%s imports %s (floor %q is above %q)",
						fileRel, impRel, floors[to].name, floors[from].name))
				}
			}
		}
	}
	for _, l := range [][]string{upward, unplaced, ebpf, helpers} {
		sort.Strings(l)
	}
	if len(upward) > 0 {
		t.Errorf("%d shipped files import a package on a higher floor (docs/architecture.md):\n  %s",
			len(upward), strings.Join(upward, "\n  "))
	}
	if len(unplaced) > 0 {
		t.Errorf("%d packages are on no floor: give their top folder a floor in layering_test.go and docs/architecture.md:\n  %s",
			len(unplaced), strings.Join(unplaced, "\n  "))
	}
	if len(helpers) > 0 {
		t.Errorf("%d shipped files import the test helpers:\n  %s", len(helpers), strings.Join(helpers, "\n  "))
	}
	if len(ebpf) > 0 {
		t.Errorf("%d files outside probes/ import cilium/ebpf:\n  %s", len(ebpf), strings.Join(ebpf, "\n  "))
	}
}

// TestFloorOf pins the prefix matching the check relies on: the longest
// prefix wins and a prefix matches whole path elements only.
func TestFloorOf(t *testing.T) {
	index := map[string]int{}
	for i, f := range floors {
		index[f.name] = i
	}
	for rel, want := range map[string]string{
		"base/safeio":                   "base",
		"collectors/internal/netnstest": "collectors",
		"internal/cli":                  "internal",
		"report/compare":                "report",
		"privilege":                     "recipes",
		"integration/springapp":         "tests",
		"lab/jvmapp":                    "lab",
		"measure":                       "measure",
		"measure/replay":                "tests",
		"measure/budget":                "budget",
	} {
		if got := floorOf(rel); got != index[want] {
			t.Errorf("floorOf(%q) = %d, want floor %q (%d)", rel, got, want, index[want])
		}
	}
	for _, rel := range []string{"", "basement/x", "labs", "probesx/y", "cmdline"} {
		if got := floorOf(rel); got != -1 {
			t.Errorf("floorOf(%q) = %d (floor %q), want none", rel, got, floors[got].name)
		}
	}
}
