package tree

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ReadFile reads, parses and validates the tree file at path (YAML or JSON, by extension,
// else by content). project names the project of a file that names none; a file naming
// another is an error. Errors name the file and, for an invalid tree, the line of the first
// node each problem names (*FileError).
func ReadFile(path, project string) (*Tree, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	f, err := Parse(data, FormatOf(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case f.Project == "":
		f.Project = project
	case project != "" && project != f.Project:
		return nil, fmt.Errorf("%s is the tree of project %q, not %q (--project)", path, f.Project, project)
	}
	if f.Project == "" {
		return nil, fmt.Errorf("%s names no project: add 'project:' to the file or pass --project", path)
	}
	t, err := Build(f.Project, f.Nodes)
	var ve *ValidationError
	if errors.As(err, &ve) {
		return nil, &FileError{Path: path, File: f, Err: ve}
	}
	return t, err
}

// FileError is a ValidationError of a file: one problem a line, with the line of the first
// node it names.
type FileError struct {
	Path string
	File *File
	Err  *ValidationError
}

func (e *FileError) Unwrap() error { return e.Err }

func (e *FileError) Error() string {
	lines := make(map[string]int, len(e.File.Nodes))
	for i, n := range e.File.Nodes {
		if _, ok := lines[n.ID]; !ok {
			lines[n.ID] = e.File.Lines[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: invalid tree for project %q, %d problem(s):", e.Path, e.Err.Project, len(e.Err.Problems))
	for _, p := range e.Err.Problems {
		b.WriteString("\n  ")
		if len(p.Nodes) > 0 && lines[p.Nodes[0]] > 0 {
			fmt.Fprintf(&b, "line %d: ", lines[p.Nodes[0]])
		}
		b.WriteString(p.String())
	}
	return b.String()
}
