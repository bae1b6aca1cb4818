package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Test_FuzzFindsEveryTarget: make fuzz runs what fuzz.sh -list finds,
// which must be every fuzz target of the module as the Go parser sees them
// (func FuzzXxx(f *testing.F) in a _test.go file), so a new decoder's fuzz
// target is never left out the way four once were.
func Test_FuzzFindsEveryTarget(t *testing.T) {
	out, err := exec.Command("bash", "fuzz.sh", "-list").Output()
	if err != nil {
		t.Fatalf("fuzz.sh -list: %v", err)
	}
	listed := strings.Split(strings.TrimSpace(string(out)), "\n")

	var want []string
	root := ".."
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "jepsen" || d.Name() == ".git" || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
				continue
			}
			if star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr); ok {
				if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "F" {
					rel, _ := filepath.Rel(root, filepath.Dir(path))
					want = append(want, "./"+filepath.ToSlash(rel)+" "+fn.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("fuzz.sh -list finds\n%s\nthe Go parser finds\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
	for _, name := range []string{"FuzzDecodeMessage", "FuzzOpenMessage", "FuzzDecodeRequest", "FuzzLiveFrames"} {
		if !slices.ContainsFunc(listed, func(l string) bool { return strings.HasSuffix(l, " "+name) }) {
			t.Errorf("fuzz.sh -list leaves out %s", name)
		}
	}
}
