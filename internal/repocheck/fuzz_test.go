package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// fuzzTarget is one Fuzz function: its package as `go test` is given it
// from the repository root ("./wire/") and its name.
type fuzzTarget struct{ pkg, name string }

// moduleFuzzTargets finds every Fuzz function in the _test.go files of the
// main module. Fuzz functions in a nested module (its own go.mod) are
// returned in nested: `make fuzz` runs from the root and cannot reach them.
func moduleFuzzTargets(t *testing.T) (targets, nested []fuzzTarget) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || !takesTestingF(fn) {
				continue
			}
			ft := fuzzTarget{pkg: "./" + filepath.ToSlash(rel) + "/", name: fn.Name.Name}
			if inNestedModule(filepath.Dir(path)) {
				nested = append(nested, ft)
			} else {
				targets = append(targets, ft)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return targets, nested
}

func takesTestingF(fn *ast.FuncDecl) bool {
	p := fn.Type.Params.List
	if len(p) != 1 {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "F"
}

// inNestedModule reports whether dir is in a module other than the root's.
func inNestedModule(dir string) bool {
	for d := dir; d != root && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

// makeFuzzTargets reads the recipe of the Makefile's fuzz rule: each line
// `go test ... -fuzz='^Name$$' ... ./pkg/`.
func makeFuzzTargets(t *testing.T) []fuzzTarget {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, ok := strings.Cut(string(b), "\nfuzz:")
	if !ok {
		t.Fatal("the Makefile has no fuzz rule")
	}
	line := regexp.MustCompile(`-fuzz='\^(\w+)\$\$'.*\s(\./\S*/)$`)
	var out []fuzzTarget
	for _, l := range strings.Split(recipe, "\n")[1:] {
		if !strings.HasPrefix(l, "\t") {
			break
		}
		m := line.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			t.Fatalf("Makefile fuzz rule: cannot read %q", l)
		}
		out = append(out, fuzzTarget{pkg: m[2], name: m[1]})
	}
	return out
}

// TestMakeFuzzRunsEveryFuzzTarget: `make fuzz` runs every Fuzz function of
// the module, and names none that does not exist.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	targets, nested := moduleFuzzTargets(t)
	for _, ft := range nested {
		t.Errorf("%s in %s is in a nested module, which `make fuzz` does not reach", ft.name, ft.pkg)
	}
	if len(targets) == 0 {
		t.Fatal("no Fuzz functions found: the walk is broken")
	}
	listed := map[fuzzTarget]bool{}
	for _, ft := range makeFuzzTargets(t) {
		listed[ft] = true
	}
	for _, ft := range targets {
		if !listed[ft] {
			t.Errorf("%s in %s is not run by `make fuzz`: add it to the Makefile's fuzz rule", ft.name, ft.pkg)
		}
		delete(listed, ft)
	}
	for ft := range listed {
		t.Errorf("the Makefile's fuzz rule runs %s in %s, which does not exist", ft.name, ft.pkg)
	}
}
