package repocheck

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/design/architecture.md's layer drawing from Layers")

// modulePath is the service module's import path.
const modulePath = "github.com/gameops/rollup"

// repoRoot is the repository's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// importGraph returns the service module's packages and the module packages each imports
// (non-test files), from go list.
func importGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], modulePath+"/")
		if !ok {
			continue
		}
		g[pkg] = nil
		for _, imp := range f[1:] {
			if p, ok := strings.CutPrefix(imp, modulePath+"/"); ok && !strings.HasPrefix(p, "embedded") {
				g[pkg] = append(g[pkg], p)
			}
		}
	}
	return g
}

// violations lists what breaks the layers in graph: a package on no floor, an import of a
// package on the same or a higher floor, and a floor's package that does not exist.
func violations(layers [][]string, graph map[string][]string) []string {
	floor := map[string]int{}
	for i, f := range layers {
		for _, p := range f {
			floor[p] = i
		}
	}
	var out []string
	for _, pkg := range slices.Sorted(maps.Keys(graph)) {
		fp, ok := floor[pkg]
		if !ok {
			out = append(out, fmt.Sprintf("package %s is on no floor: give it one in internal/repocheck/layers.go", pkg))
			continue
		}
		for _, imp := range graph[pkg] {
			if fi, ok := floor[imp]; ok && fi >= fp {
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d): imports point down", pkg, fp, imp, fi))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(floor)) {
		if _, ok := graph[p]; !ok {
			out = append(out, fmt.Sprintf("layers.go names %s, which is not a package of the module", p))
		}
	}
	return out
}

// TestLayers: every package of the module is on a floor and imports only lower floors.
func TestLayers(t *testing.T) {
	for _, v := range violations(Layers(), importGraph(t, repoRoot(t))) {
		t.Error(v)
	}
}

// TestViolations checks the checker itself on small graphs.
func TestViolations(t *testing.T) {
	layers := [][]string{{"a", "b"}, {"c"}, {"d"}}
	for _, tc := range []struct {
		name  string
		graph map[string][]string
		want  []string
	}{
		{"down only", map[string][]string{"a": nil, "b": nil, "c": {"a"}, "d": {"c", "b"}}, nil},
		{"upward", map[string][]string{"a": {"c"}, "b": nil, "c": nil, "d": nil}, []string{"a (floor 0) imports c (floor 1): imports point down"}},
		{"same floor", map[string][]string{"a": {"b"}, "b": nil, "c": nil, "d": nil}, []string{"a (floor 0) imports b (floor 0): imports point down"}},
		{"new package", map[string][]string{"a": nil, "b": nil, "c": nil, "d": nil, "e": {"a"}},
			[]string{"package e is on no floor: give it one in internal/repocheck/layers.go"}},
		{"gone package", map[string][]string{"a": nil, "b": nil, "c": nil},
			[]string{"layers.go names d, which is not a package of the module"}},
	} {
		if got := violations(layers, tc.graph); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

const (
	drawingBegin = "<!-- layers: generated from internal/repocheck/layers.go; go test ./internal/repocheck -update -->"
	drawingEnd   = "<!-- layers: end -->"
)

// drawing renders layers, top floor first.
func drawing(layers [][]string) string {
	var b strings.Builder
	b.WriteString("```\n")
	for i := len(layers) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%d  %s\n", i, strings.Join(layers[i], ", "))
	}
	b.WriteString("```\n")
	return b.String()
}

// TestArchitectureDrawing: the drawing in docs/design/architecture.md is Layers'.
func TestArchitectureDrawing(t *testing.T) {
	path := filepath.Join(repoRoot(t), "docs", "design", "architecture.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(drawingBegin)), bytes.Index(doc, []byte(drawingEnd))
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q … %q", path, drawingBegin, drawingEnd)
	}
	want := drawingBegin + "\n" + drawing(Layers())
	got := string(doc[i:j])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i]...), want...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's layer drawing is not Layers' (go test ./internal/repocheck -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
}
