package tree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFile: a file's project, the --project override, and errors that name the file and
// the lines of the nodes a problem names.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, text, project string
		wantProject         string
		wantErr             []string
	}{
		{"ok.yaml", "project: p\nnodes: [{id: r, type: t}, {id: a, type: t, parent: r}]\n", "", "p", nil},
		{"given.json", `{"nodes": [{"id": "r", "type": "t"}]}`, "q", "q", nil},
		{"none.yaml", "nodes: [{id: r, type: t}]\n", "", "", []string{"none.yaml names no project"}},
		{"other.yaml", "project: a\nnodes: [{id: r, type: t}]\n", "b", "", []string{`is the tree of project "a", not "b"`}},
		{"bad.yaml", "project: p\nnodes:\n  - {id: r, type: t}\n  - {id: a, type: t, parent: ghost}\n", "", "",
			[]string{"bad.yaml: invalid tree for project \"p\", 1 problem(s):", "\n  line 4: missing parent"}},
		{"syntax.json", "{\"project\": \"p\",\n\"root\": {\"id\": 1,, }}", "", "", []string{"syntax.json: line 2:"}},
	}
	for _, tc := range tests {
		tr, err := ReadFile(write(tc.name, tc.text), tc.project)
		if tc.wantErr == nil {
			if err != nil || tr.Project() != tc.wantProject {
				t.Errorf("%s: %v, %v", tc.name, tr, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}
	var fe *FileError
	var ve *ValidationError
	_, err := ReadFile(filepath.Join(dir, "bad.yaml"), "")
	if !errors.As(err, &fe) || !errors.As(err, &ve) || fe.Path != filepath.Join(dir, "bad.yaml") {
		t.Errorf("bad.yaml: %T %v", err, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.yaml"), "p"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
