package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goMarker is the comment that allows a bare go statement, followed by the reason:
// `//repocheck:go the reason it has no owner`, after the statement on its line or on the line
// above it.
const goMarker = "//repocheck:go"

// goExempt are the module's packages whose go statements are not checked: the benchmark
// harnesses and their command, which are not the service.
var goExempt = []string{"internal/bench", "cmd/rollup-bench"}

// serviceGoFiles returns the non-test Go files of the service module's packages (all build
// tags), minus goExempt's, relative to root. The embedded server is a module of its own.
func serviceGoFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{.Dir}}|{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .IgnoredGoFiles " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		pkg, ok := strings.CutPrefix(f[0], modulePath+"/")
		if f[0] == modulePath {
			pkg, ok = ".", true
		}
		if !ok || strings.HasPrefix(pkg, "embedded") || slices.Contains(goExempt, pkg) {
			continue
		}
		for _, name := range strings.Fields(f[2]) {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			rel, err := filepath.Rel(root, filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, rel)
		}
	}
	return files
}

// bareGoroutines lists the go statements of a Go file (src, named name) that carry no
// goMarker with a reason on their line or the line above.
func bareGoroutines(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(src), "\n")
	marked := map[int]bool{} // lines a marker with a reason allows
	for _, g := range file.Comments {
		for _, c := range g.List {
			if reason, ok := strings.CutPrefix(c.Text, goMarker); ok && strings.TrimSpace(reason) != "" {
				pos := fset.Position(c.Slash)
				if strings.TrimSpace(lines[pos.Line-1][:pos.Column-1]) == "" {
					marked[pos.Line+1] = true // a comment line: the statement below
				} else {
					marked[pos.Line] = true // after the statement
				}
			}
		}
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok {
			if pos := fset.Position(g.Go); !marked[pos.Line] {
				out = append(out, fmt.Sprintf("%s:%d: a bare go statement: start it in a conc pool or WaitGroup its owner waits for, or say why it has none (%s reason)",
					name, pos.Line, goMarker))
			}
		}
		return true
	})
	return out, nil
}

// TestNoBareGoroutines: service code starts no goroutine that no one waits for (every one
// belongs to a conc pool or WaitGroup whose owner waits for it, so none outlives its owner and
// a panic reaches the owner), save where a goMarker says why.
func TestNoBareGoroutines(t *testing.T) {
	root := repoRoot(t)
	files := serviceGoFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("only %d files of the service found", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		bare, err := bareGoroutines(f, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bare {
			t.Error(b)
		}
	}
}

// TestBareGoroutines checks the checker itself on small files.
func TestBareGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []int // lines reported
	}{
		{"none", "func f() { g() }", nil},
		{"bare", "func f() {\n\tgo g()\n}", []int{4}},
		{"bare literal", "func f() {\n\tx := 1\n\tgo func() { _ = x }()\n}", []int{5}},
		{"nested", "func f() {\n\tfor {\n\t\tif true {\n\t\t\tgo g()\n\t\t}\n\t}\n}", []int{6}},
		{"marked on its line", "func f() {\n\tgo g() //repocheck:go nothing can wait: the process exits\n}", nil},
		{"marked above", "func f() {\n\t//repocheck:go nothing can wait: the process exits\n\tgo g()\n}", nil},
		{"marker without a reason", "func f() {\n\tgo g() //repocheck:go\n}", []int{4}},
		{"marker too far above", "func f() {\n\t//repocheck:go a reason\n\n\tgo g()\n}", []int{6}},
		{"one marked, one not", "func f() {\n\tgo g() //repocheck:go a reason\n\tgo g()\n}", []int{5}},
		{"in a string or a comment", "// go g()\nfunc f() { _ = \"go g()\" }", nil},
	} {
		src := "package p\n\n" + tc.src + "\n"
		got, err := bareGoroutines("p.go", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var want []string
		for _, l := range tc.want {
			want = append(want, fmt.Sprintf("p.go:%d: a bare go statement: start it in a conc pool or WaitGroup its owner waits for, or say why it has none (%s reason)", l, goMarker))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", tc.name, got, want)
		}
	}
}
