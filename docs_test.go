package perfscope_test

// The documentation, checked: every relative link in the repository's
// Markdown resolves (the file, and the heading when it names one), the
// rules docs/rules.md describes are exactly the rules diagnose/ runs, and
// nothing the project ships or documents cites our own process ("issue N",
// "seed N", "task N" with a number) instead of a source users know.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/perfscope/perfscope/diagnose"
)

// trackedFiles lists the repository's files whose names match one of the
// patterns, from git when the tree is a checkout, else by walking it.
func trackedFiles(t *testing.T, patterns ...string) []string {
	t.Helper()
	args := append([]string{"ls-files", "-z", "--"}, patterns...)
	if out, err := exec.Command("git", args...).Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, d.Name()); ok {
				files = append(files, path)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing the repository's files: %v", err)
	}
	return files
}

// mdLine is one line of a Markdown file outside fenced code blocks, with
// inline code spans blanked so that a link or heading inside them is not
// taken for one.
type mdLine struct {
	n          int
	text, code string // code: text with `spans` blanked
}

var codeSpan = regexp.MustCompile("`+[^`]*`+")

func markdownLines(t *testing.T, path string) []mdLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var out []mdLine
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out = append(out, mdLine{n: n, text: line, code: codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			return strings.Repeat(" ", len(s))
		})})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return out
}

var (
	headingLine  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkInHead   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	notSlugChars = regexp.MustCompile(`[^\p{L}\p{M}\p{N}\p{Pc} -]`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation and
// symbols dropped (inline code's backticks too), spaces made hyphens.
func slug(heading string) string {
	h := linkInHead.ReplaceAllString(heading, "$1")
	h = strings.ToLower(strings.TrimSpace(h))
	h = notSlugChars.ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// anchors are the targets a link may name in a Markdown file: its
// headings' slugs (a repeated one numbered as GitHub numbers it) and
// explicit HTML anchors.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range markdownLines(t, path) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// inlineLink matches [text](target) and ![alt](target), with an optional
// title; refLink matches a reference definition "[name]: target".
var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	external   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

func TestDocsLinksResolve(t *testing.T) {
	files := trackedFiles(t, "*.md")
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	anchorCache := map[string]map[string]bool{}
	checked := 0
	for _, file := range files {
		for _, l := range markdownLines(t, file) {
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(l.code, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(l.code); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if external.MatchString(target) || strings.HasPrefix(target, "//") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if strings.HasPrefix(path, "/") {
						dest = filepath.FromSlash(strings.TrimPrefix(path, "/"))
					}
				}
				st, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", file, l.n, target, dest)
					continue
				}
				if anchor == "" || st.IsDir() || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, ok := anchorCache[dest]
				if !ok {
					a = anchors(t, dest)
					anchorCache[dest] = a
				}
				if !a[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.n, target, dest, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link parser is broken")
	}
}

// ruleTables are diagnose's rule tables by name. A table diagnose adds
// must be added here (TestDocsRuleTablesListed fails until it is), so that
// its rules are held to docs/rules.md.
var ruleTables = map[string][]string{
	"NetRules":      ruleIDs(diagnose.NetRules),
	"TCPRules":      ruleIDs(diagnose.TCPRules),
	"LockRules":     ruleIDs(diagnose.LockRules),
	"JVMRules":      ruleIDs(diagnose.JVMRules),
	"GCRules":       ruleIDs(diagnose.GCRules),
	"TimelineRules": ruleIDs(diagnose.TimelineRules),
	"OffCPURules":   ruleIDs(diagnose.OffCPURules),
	"GoRules":       ruleIDs(diagnose.GoRules),
}

func ruleIDs[E any](rules []diagnose.Rule[E]) []string {
	ids := make([]string, 0, len(rules))
	for _, r := range rules {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestDocsRuleTablesListed finds every package-level []Rule[...] variable
// in diagnose/ by parsing its source, and fails for one ruleTables lacks.
func TestDocsRuleTablesListed(t *testing.T) {
	fset := token.NewFileSet()
	found := map[string]bool{}
	files, err := filepath.Glob(filepath.Join("diagnose", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("listing diagnose/: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", f, err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if isRuleSlice(vs.Type) || (i < len(vs.Values) && isRuleSliceLit(vs.Values[i])) {
						found[name.Name] = true
					}
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("no rule table found in diagnose/: the parser is broken")
	}
	for name := range found {
		if _, ok := ruleTables[name]; !ok {
			t.Errorf("diagnose.%s is a rule table this test does not hold to docs/rules.md: add it to ruleTables", name)
		}
	}
	for name := range ruleTables {
		if !found[name] {
			t.Errorf("ruleTables names diagnose.%s, which is no longer a []Rule variable in diagnose/", name)
		}
	}
}

func isRuleSlice(e ast.Expr) bool {
	at, ok := e.(*ast.ArrayType)
	if !ok || at.Len != nil {
		return false
	}
	idx, ok := at.Elt.(*ast.IndexExpr)
	if !ok {
		return false
	}
	id, ok := idx.X.(*ast.Ident)
	return ok && id.Name == "Rule"
}

func isRuleSliceLit(e ast.Expr) bool {
	cl, ok := e.(*ast.CompositeLit)
	return ok && cl.Type != nil && isRuleSlice(cl.Type)
}

// docRuleRow is a table row of docs/rules.md whose first cell is a rule ID.
var docRuleRow = regexp.MustCompile("^\\|\\s*`([a-z][a-z0-9-]*(?:\\.[a-z0-9-]+)+)`\\s*\\|")

func TestDocsRulesMatchCode(t *testing.T) {
	inCode := map[string]string{}
	for table, ids := range ruleTables {
		for _, id := range ids {
			inCode[id] = table
		}
	}
	if len(inCode) == 0 {
		t.Fatal("diagnose has no rules")
	}
	inDocs := map[string]int{}
	for _, l := range markdownLines(t, filepath.Join("docs", "rules.md")) {
		if m := docRuleRow.FindStringSubmatch(l.text); m != nil {
			if prev, dup := inDocs[m[1]]; dup {
				t.Errorf("docs/rules.md:%d: %s is described twice (first at line %d)", l.n, m[1], prev)
				continue
			}
			inDocs[m[1]] = l.n
		}
	}
	var missing, unknown []string
	for id, table := range inCode {
		if _, ok := inDocs[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s (diagnose.%s)", id, table))
		}
	}
	for id, line := range inDocs {
		if _, ok := inCode[id]; !ok {
			unknown = append(unknown, fmt.Sprintf("%s (line %d)", id, line))
		}
	}
	sort.Strings(missing)
	sort.Strings(unknown)
	for _, m := range missing {
		t.Errorf("rule %s is not described in docs/rules.md (a table row starting with its ID)", m)
	}
	for _, u := range unknown {
		t.Errorf("docs/rules.md describes %s, which no rule table in diagnose/ has", u)
	}
}

// processCitation matches a citation of our own process: "issue N",
// "issues #N", "seed N", "task N", "issue-N", N a number.
var (
	processCitation = regexp.MustCompile(`(?i)\b(issues?|seeds?|tasks?)[ -]?#?[0-9]+`)
	urlText         = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)>\]"'` + "`" + `]+`)
)

// TestDocsCiteNoProcess fails when product text — Markdown, Go (help,
// findings, comments), recipes, scripts — cites our own notes instead of
// a source users know. An upstream project's issue is cited by its link
// (https://github.com/OWNER/REPO/issues/N), which is allowed, as is a
// command-line flag such as a generator's -seed 5.
func TestDocsCiteNoProcess(t *testing.T) {
	files := trackedFiles(t, "*.md", "*.go", "*.yaml", "*.yml", "*.sh", "*.bt", "*.c", "*.h", "Dockerfile", "Makefile")
	if len(files) == 0 {
		t.Fatal("no files found")
	}
	for _, file := range files {
		if strings.Contains(filepath.ToSlash(file), "/testdata/") || strings.HasPrefix(filepath.ToSlash(file), "testdata/") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			clean := urlText.ReplaceAllString(line, "")
			for _, loc := range processCitation.FindAllStringIndex(clean, -1) {
				if loc[0] > 0 && clean[loc[0]-1] == '-' {
					continue // a flag: -seed 5
				}
				t.Errorf("%s:%d: %q cites our own process; name the source users know (a talk, a tool, a kernel commit, an upstream issue's link)",
					file, n+1, clean[loc[0]:loc[1]])
			}
		}
	}
}

// docPath is a path under docs/ named in Go source (a comment pointing a
// reader at the page that documents the code).
var docPath = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// TestDocsPathsInGoExist fails when Go source names a docs/ page that does
// not exist, as a comment pointing at a page that was never written would.
func TestDocsPathsInGoExist(t *testing.T) {
	named := 0
	for _, file := range trackedFiles(t, "*.go") {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("reading %s: %v", file, err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, p := range docPath.FindAllString(line, -1) {
				named++
				if _, err := os.Stat(filepath.FromSlash(p)); err != nil {
					t.Errorf("%s:%d: names %s, which does not exist", file, n+1, p)
				}
			}
		}
	}
	if named == 0 {
		t.Fatal("no Go file names a docs/ page: the pattern is broken")
	}
}
