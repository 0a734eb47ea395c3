package tree

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .want files of testdata/")

// render is what the testdata .want files hold: the layout and outline of a valid file, or the
// error of an invalid one.
func render(data []byte, f Format) string {
	file, err := Parse(data, f)
	if err != nil {
		return "parse error: " + err.Error() + "\n"
	}
	tr, err := Build(file.Project, file.Nodes)
	var ve *ValidationError
	if errors.As(err, &ve) {
		var b strings.Builder
		fmt.Fprintf(&b, "invalid project %q:\n", ve.Project)
		for _, p := range ve.Problems {
			fmt.Fprintf(&b, "  %s %q: %s\n", p.Kind, p.Nodes, p.Detail)
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "project %s, %s layout, %d nodes, %d leaves\n", tr.Project(), file.Layout, tr.Len(), len(tr.Leaves()))
	if err := tr.WriteText(&b); err != nil {
		return "write: " + err.Error()
	}
	return b.String()
}

// TestTestdata parses every file under testdata/valid and testdata/invalid and compares with
// its .want file (go test -run TestTestdata -update rewrites them).
func TestTestdata(t *testing.T) {
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		inputs := 0
		for _, path := range files {
			if strings.HasSuffix(path, ".want") {
				continue
			}
			inputs++
			t.Run(dir+"/"+filepath.Base(path), func(t *testing.T) {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				got := render(data, FormatOf(path))
				if auto := render(data, FormatAuto); auto != got {
					t.Errorf("auto-detected format gives\n%s\nextension gives\n%s", auto, got)
				}
				valid := strings.HasPrefix(got, "project ")
				if valid != (dir == "valid") {
					t.Errorf("in %s but got:\n%s", dir, got)
				}
				wantPath := path + ".want"
				if *update {
					if err := os.WriteFile(wantPath, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(wantPath)
				if err != nil {
					t.Fatal(err)
				}
				if got != string(want) {
					t.Errorf("got:\n%s\nwant:\n%s", got, want)
				}
				if valid {
					checkRoundTrip(t, data)
				}
			})
		}
		if inputs < 5 {
			t.Fatalf("only %d files in testdata/%s", inputs, dir)
		}
	}
}

// checkRoundTrip encodes the tree of data in every format and layout and parses it back.
func checkRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	tr, err := ParseTree(data, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{FormatYAML, FormatJSON} {
		for _, l := range []Layout{Nested, Flat} {
			enc, err := Encode(tr, f, l)
			if err != nil {
				t.Fatalf("Encode %s %s: %v", f, l, err)
			}
			back, err := Parse(enc, FormatAuto)
			if err != nil {
				t.Fatalf("Parse(Encode %s %s): %v\n%s", f, l, err, enc)
			}
			if back.Layout != l {
				t.Errorf("layout %s read back as %s", l, back.Layout)
			}
			if err := sameTree(tr, back); err != nil {
				t.Fatalf("%s %s round trip: %v\n%s", f, l, err, enc)
			}
		}
	}
}

// sameTree reports how file differs from tr (same project, same nodes with the same parents).
func sameTree(tr *Tree, file *File) error {
	if file.Project != tr.Project() {
		return fmt.Errorf("project %q, want %q", file.Project, tr.Project())
	}
	got, want := slices.Clone(file.Nodes), tr.Nodes()
	cmp := func(a, b Node) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		return fmt.Errorf("nodes %v, want %v", got, want)
	}
	return nil
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]Format{
		"a.yaml": FormatYAML, "a.YML": FormatYAML, "dir.json/x.Json": FormatJSON, "tree": FormatAuto, "a.txt": FormatAuto, "-": FormatAuto,
	} {
		if got := FormatOf(name); got != want {
			t.Errorf("FormatOf(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		f        Format
		wantLine int
		want     string
	}{
		{"yaml forced on json-ish is fine", `{"project": "p", "root": {"id": "r", "type": "t"}}`, FormatYAML, 0, ""},
		{"json forced on yaml", "project: p\n", FormatJSON, 1, "invalid character"},
		{"bom json", "\xef\xbb\xbf{\"project\": \"p\", \"root\": {\"id\": \"r\", \"type\": \"t\"}}", FormatAuto, 1, "invalid character"},
		{"truncated json", `{"project": "p", "root": {"id": "r"`, FormatJSON, 1, "unexpected end"},
		{"empty json", "  \n", FormatJSON, 0, "empty file"},
		{"nodes not a list", "project: p\nnodes: {id: r}\n", FormatYAML, 2, "nodes must be a list"},
		{"node not a mapping", "project: p\nnodes:\n  - r\n", FormatYAML, 3, `got "r"`},
		{"child not a mapping", "project: p\nroot: {id: r, type: t, children: [[]]}\n", FormatYAML, 2, "got a list"},
		{"key not scalar", "project: p\n? [a]\n: b\n", FormatYAML, 2, "keys must be names"},
		{"project list", "project: [p]\nnodes: []\n", FormatYAML, 1, "project must be a string"},
		{"binary id", "project: p\nroot: {id: !!binary aGk=, type: t}\n", FormatYAML, 2, "!!binary"},
		{"repeated project", "project: p\nproject: q\nnodes: []\n", FormatYAML, 2, `field "project" repeated`},
		{"null nodes", "project: p\nnodes:\n", FormatYAML, 0, ""},
		{"too deep json", strings.Repeat("[", maxValueDepth+2) + strings.Repeat("]", maxValueDepth+2), FormatJSON, 1, "nested deeper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), tc.f)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *ParseError", err, err)
			}
			if pe.Line != tc.wantLine || !strings.Contains(pe.Msg, tc.want) {
				t.Fatalf("err = %+v, want line %d and %q", pe, tc.wantLine, tc.want)
			}
		})
	}
}

func TestParseLines(t *testing.T) {
	data := []byte("project: p\nnodes:\n  - {id: r, type: t}\n  - id: a\n    type: t\n    parent: r\n")
	f, err := Parse(data, FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Lines, []int{3, 4}) {
		t.Fatalf("Lines = %v", f.Lines)
	}
	data = []byte("{\"project\": \"p\",\n\"root\": {\"id\": \"r\", \"type\": \"t\", \"children\": [\n{\"id\": \"a\", \"type\": \"t\"}]}}")
	if f, err = Parse(data, FormatJSON); err != nil || !slices.Equal(f.Lines, []int{2, 3}) {
		t.Fatalf("Lines = %v, %v", f.Lines, err)
	}
}

// TestEncodeDeep checks the nested layout's depth limit and that the flat layout and WriteText
// handle a chain far deeper (no recursion).
func TestEncodeDeep(t *testing.T) {
	chain := func(n int) *Tree {
		nodes := []Node{{ID: "n0", Type: "t"}}
		for i := 1; i <= n; i++ {
			nodes = append(nodes, Node{ID: fmt.Sprintf("n%d", i), Type: "t", Parent: fmt.Sprintf("n%d", i-1)})
		}
		tr, err := Build("p", nodes)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	ok := chain(MaxNestedDepth)
	for _, f := range []Format{FormatYAML, FormatJSON} {
		enc, err := Encode(ok, f, Nested)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(enc, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := sameTree(ok, back); err != nil {
			t.Fatal(err)
		}
	}
	deep := chain(10 * MaxNestedDepth)
	if _, err := Encode(deep, FormatJSON, Nested); err == nil || !strings.Contains(err.Error(), "flat layout") {
		t.Fatalf("nested encode of a too deep tree: %v", err)
	}
	enc, err := Encode(deep, FormatJSON, Flat)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(enc, FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTree(deep, back); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := deep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines != deep.Len() {
		t.Fatalf("WriteText wrote %d lines, want %d", lines, deep.Len())
	}
	// One level too deep in a hand-written nested file.
	var b strings.Builder
	b.WriteString(`{"project": "p", "root": `)
	for i := 0; i <= MaxNestedDepth+1; i++ {
		fmt.Fprintf(&b, `{"id": "n%d", "type": "t", "children": [`, i)
	}
	b.WriteString(strings.Repeat("]}", MaxNestedDepth+2) + "}")
	if _, err := Parse([]byte(b.String()), FormatJSON); err == nil || !strings.Contains(err.Error(), "flat layout") {
		t.Fatalf("too deep nested file: %v", err)
	}
}

// FuzzParse: Parse never panics, a file it accepts either fails Build with a ValidationError
// or gives a tree whose invariants hold and that survives an Encode/Parse round trip.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil && !strings.HasSuffix(p, ".want") {
				f.Add(data, uint8(FormatOf(p)))
			}
		}
	}
	f.Add([]byte("project: p\nroot: {id: r, type: t, children: [{id: a, type: t}]}"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		file, err := Parse(data, Format(format%3))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		if len(file.Lines) != len(file.Nodes) {
			t.Fatalf("%d lines for %d nodes", len(file.Lines), len(file.Nodes))
		}
		tr, err := Build(file.Project, file.Nodes)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Build error %v (%T)", err, err)
			}
			return
		}
		if ValidateName("project", tr.Project()) != nil {
			t.Fatalf("accepted project %q", tr.Project())
		}
		leaves := 0
		for _, nd := range tr.Nodes() {
			if ValidateID(nd.ID) != nil || ValidateType(nd.Type) != nil {
				t.Fatalf("accepted node %+v", nd)
			}
			anc := tr.Ancestors(nd.ID)
			if nd.Parent == "" {
				if nd != tr.Root() || len(anc) != 0 {
					t.Fatalf("second root %+v", nd)
				}
			} else if len(anc) == 0 || anc[len(anc)-1] != tr.Root() || len(anc) != tr.Depth(nd.ID) {
				t.Fatalf("node %+v does not lead to the root: %v", nd, anc)
			}
			if tr.IsLeaf(nd.ID) {
				leaves++
			}
		}
		if leaves != tr.LeafCount(tr.Root().ID) {
			t.Fatalf("%d leaves, root LeafCount %d", leaves, tr.LeafCount(tr.Root().ID))
		}
		checkRoundTrip(t, mustEncode(t, tr))
	})
}

func mustEncode(t *testing.T, tr *Tree) []byte {
	t.Helper()
	b, err := Encode(tr, FormatYAML, Flat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
