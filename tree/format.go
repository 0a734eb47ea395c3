package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Format is the encoding of a tree file.
type Format int

// The encodings Parse reads and Encode writes.
const (
	// FormatAuto lets Parse decide from the content: JSON when the first non-blank byte is
	// "{", YAML otherwise.
	FormatAuto Format = iota
	// FormatYAML is YAML 1.2 (gopkg.in/yaml.v3); anchors and aliases are rejected.
	FormatYAML
	// FormatJSON is JSON (RFC 8259).
	FormatJSON
)

// String returns "auto", "yaml" or "json".
func (f Format) String() string {
	switch f {
	case FormatYAML:
		return "yaml"
	case FormatJSON:
		return "json"
	}
	return "auto"
}

// FormatOf returns the format a file name's extension says: FormatYAML for .yaml and .yml,
// FormatJSON for .json (any case), FormatAuto otherwise.
func FormatOf(name string) Format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return FormatYAML
	case ".json":
		return FormatJSON
	}
	return FormatAuto
}

// Layout is the shape of a tree file.
type Layout int

// The two layouts. Parse tells them apart by the top-level key: root or nodes.
const (
	// Nested: {project: p, root: {id, type, children: [{id, type, children: [...]}, ...]}}.
	Nested Layout = iota
	// Flat: {project: p, nodes: [{id, type, parent}, ...]} (the root has no parent, or
	// parent "" or null); nodes may come in any order.
	Flat
)

// String returns "nested" or "flat".
func (l Layout) String() string {
	if l == Flat {
		return "flat"
	}
	return "nested"
}

// MaxNestedDepth is the deepest tree (in levels below the root) the nested layout holds (its
// indentation grows with depth, so deep nested files grow quadratically);
// deeper trees need the flat layout.
const MaxNestedDepth = 200

// maxValueDepth bounds the nesting of JSON values Parse reads (the YAML decoder has its own
// bound of 10000): a nested tree of MaxNestedDepth levels takes about twice as many.
const maxValueDepth = 2*MaxNestedDepth + 8

// File is a parsed tree file: not yet validated (see Build).
type File struct {
	// Project is the project named in the file, "" when it names none.
	Project string
	// Layout is the layout the file uses.
	Layout Layout
	// Nodes lists the nodes: in file order for the flat layout, depth first (a parent before
	// its children) for the nested one.
	Nodes []Node
	// Lines holds the line of each node in the file (1-based), for error messages.
	Lines []int
}

// ParseError is a malformed tree file: its line (1-based, 0 when unknown) and what is wrong.
type ParseError struct {
	// Line is the line of the offending value, 0 when the decoder did not say.
	Line int
	// Msg says what is wrong.
	Msg string
}

// Error returns "line N: msg", or msg when the line is unknown.
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Parse decodes a tree file in either layout. It is strict: unknown or repeated fields,
// values of the wrong kind, a missing id or type, YAML aliases, several YAML documents and
// trailing data after the JSON value are errors (*ParseError, with the line when known).
// Ids, types and parents must be scalars; YAML numbers and booleans are read as their text
// (id: 007 is "007"), null as "". Parse does not validate the tree: call Build (or use
// ParseTree).
func Parse(data []byte, f Format) (*File, error) {
	if f == FormatAuto {
		f = FormatYAML
		if t := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n"); len(t) > 0 && t[0] == '{' {
			f = FormatJSON
		}
	}
	var (
		doc *yaml.Node
		err error
	)
	switch f {
	case FormatYAML:
		doc, err = decodeYAML(data)
	case FormatJSON:
		doc, err = decodeJSON(data)
	default:
		return nil, fmt.Errorf("unknown format %d", int(f))
	}
	if err != nil {
		return nil, err
	}
	return walkFile(doc)
}

// ParseTree parses a file (see Parse) and builds the tree of the project it names.
func ParseTree(data []byte, f Format) (*Tree, error) {
	file, err := Parse(data, f)
	if err != nil {
		return nil, err
	}
	return Build(file.Project, file.Nodes)
}

// decodeYAML reads exactly one YAML document.
func decodeYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{Msg: "empty file"}
		}
		return nil, yamlError(err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, yamlError(err)
	default:
		return nil, &ParseError{Line: more.Line, Msg: "more than one YAML document"}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

// yamlError turns a yaml.v3 error ("yaml: line 3: did not find expected key") into a
// ParseError with its line.
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
	}
	return &ParseError{Line: line, Msg: "yaml: " + msg}
}

// walkFile reads the top-level mapping.
func walkFile(top *yaml.Node) (*File, error) {
	if top.Kind != yaml.MappingNode {
		return nil, &ParseError{Line: top.Line, Msg: "the file must be a mapping with project and root (nested) or nodes (flat)"}
	}
	f := &File{}
	var root, nodes *yaml.Node
	err := eachField(top, "file", []string{"project", "root", "nodes"}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "project":
			f.Project, err = scalar(v, "project")
		case "root":
			root = v
		case "nodes":
			nodes = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case root != nil && nodes != nil:
		return nil, &ParseError{Line: nodes.Line, Msg: "both root (nested layout) and nodes (flat layout): use one"}
	case root != nil:
		f.Layout = Nested
		if err := f.walkNested(root, "", 0); err != nil {
			return nil, err
		}
	case nodes != nil:
		f.Layout = Flat
		if err := f.walkFlat(nodes); err != nil {
			return nil, err
		}
	default:
		return nil, &ParseError{Line: top.Line, Msg: "no root (nested layout) and no nodes (flat layout)"}
	}
	return f, nil
}

// walkNested appends n and its descendants (depth first, parents first).
func (f *File) walkNested(n *yaml.Node, parent string, depth int) error {
	if depth > MaxNestedDepth {
		return &ParseError{Line: n.Line, Msg: fmt.Sprintf("nested deeper than %d levels: use the flat layout", MaxNestedDepth)}
	}
	var children *yaml.Node
	nd, err := readNode(n, "children", func(v *yaml.Node) error {
		children = v
		return nil
	})
	if err != nil {
		return err
	}
	nd.Parent = parent
	f.Nodes = append(f.Nodes, nd)
	f.Lines = append(f.Lines, n.Line)
	if children == nil || isNull(children) {
		return nil
	}
	if children.Kind != yaml.SequenceNode {
		return &ParseError{Line: children.Line, Msg: "children must be a list, got " + kindName(children)}
	}
	for _, c := range children.Content {
		if err := f.walkNested(c, nd.ID, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// walkFlat appends the nodes of the list.
func (f *File) walkFlat(list *yaml.Node) error {
	if isNull(list) {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		return &ParseError{Line: list.Line, Msg: "nodes must be a list, got " + kindName(list)}
	}
	f.Nodes = make([]Node, 0, len(list.Content))
	f.Lines = make([]int, 0, len(list.Content))
	for _, n := range list.Content {
		var parent string
		nd, err := readNode(n, "parent", func(v *yaml.Node) error {
			var err error
			parent, err = scalar(v, "parent")
			return err
		})
		if err != nil {
			return err
		}
		nd.Parent = parent
		f.Nodes = append(f.Nodes, nd)
		f.Lines = append(f.Lines, n.Line)
	}
	return nil
}

// readNode reads a node mapping of either layout: id and type, both required, and the
// layout's own field (children or parent), whose value goes to own.
func readNode(n *yaml.Node, field string, own func(v *yaml.Node) error) (Node, error) {
	if n.Kind != yaml.MappingNode {
		return Node{}, &ParseError{Line: n.Line, Msg: "a node must be a mapping with id, type and " + field + ", got " + kindName(n)}
	}
	var nd Node
	var hasID, hasType bool
	err := eachField(n, "node", []string{"id", "type", field}, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "id":
			nd.ID, err = scalar(v, "id")
			hasID = true
		case "type":
			nd.Type, err = scalar(v, "type")
			hasType = true
		default:
			err = own(v)
		}
		return err
	})
	switch {
	case err != nil:
		return Node{}, err
	case !hasID:
		return Node{}, &ParseError{Line: n.Line, Msg: "node without id"}
	case !hasType:
		return Node{}, &ParseError{Line: n.Line, Msg: "node without type"}
	}
	return nd, nil
}

// eachField calls fn for each key of mapping m, rejecting keys not in known and repeated keys.
func eachField(m *yaml.Node, what string, known []string, fn func(key string, v *yaml.Node) error) error {
	var seen []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return &ParseError{Line: k.Line, Msg: fmt.Sprintf("%s keys must be names, got %s", what, kindName(k))}
		}
		if v.Kind == yaml.AliasNode {
			return &ParseError{Line: v.Line, Msg: "YAML aliases are not supported"}
		}
		found := false
		for _, name := range known {
			if k.Value == name {
				found = true
			}
		}
		if !found {
			return &ParseError{Line: k.Line, Msg: fmt.Sprintf("unknown field %q in %s (want %s)", k.Value, what, strings.Join(known, ", "))}
		}
		for _, s := range seen {
			if s == k.Value {
				return &ParseError{Line: k.Line, Msg: fmt.Sprintf("field %q repeated in %s", k.Value, what)}
			}
		}
		seen = append(seen, k.Value)
		if err := fn(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// scalar returns the text of a scalar value ("" for null).
func scalar(v *yaml.Node, what string) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", &ParseError{Line: v.Line, Msg: fmt.Sprintf("%s must be a string, got %s", what, kindName(v))}
	}
	switch v.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool":
		return v.Value, nil
	case "!!null":
		return "", nil
	}
	return "", &ParseError{Line: v.Line, Msg: fmt.Sprintf("%s must be a string, got %s %q (quote it)", what, v.ShortTag(), v.Value)}
}

func isNull(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" }

func kindName(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if v.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", v.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

// decodeJSON reads one JSON value into the same node structure the YAML decoder builds, with
// lines, rejecting trailing data.
func decodeJSON(data []byte) (*yaml.Node, error) {
	p := &jsonReader{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	p.dec.UseNumber()
	tok, err := p.dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, &ParseError{Msg: "empty file"}
	}
	if err != nil {
		return nil, p.err(err)
	}
	v, err := p.value(tok, 0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ParseError{Line: p.line(), Msg: "json: data after the top-level value"}
	}
	return v, nil
}

type jsonReader struct {
	dec  *json.Decoder
	data []byte
}

// line returns the line of the decoder's position (tokens never span lines).
func (p *jsonReader) line() int {
	off := min(max(int(p.dec.InputOffset()), 0), len(p.data))
	return 1 + bytes.Count(p.data[:off], []byte("\n"))
}

func (p *jsonReader) err(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(max(int(se.Offset), 0), len(p.data))
		return &ParseError{Line: 1 + bytes.Count(p.data[:off], []byte("\n")), Msg: "json: " + se.Error()}
	}
	if errors.Is(err, io.EOF) {
		return &ParseError{Line: p.line(), Msg: "json: unexpected end of input"}
	}
	return &ParseError{Line: p.line(), Msg: "json: " + err.Error()}
}

func (p *jsonReader) value(tok json.Token, depth int) (*yaml.Node, error) {
	line := p.line()
	if depth > maxValueDepth {
		return nil, &ParseError{Line: line, Msg: fmt.Sprintf("json: nested deeper than %d", maxValueDepth)}
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			for p.dec.More() {
				kt, err := p.dec.Token()
				if err != nil {
					return nil, p.err(err)
				}
				key, ok := kt.(string)
				if !ok { // the decoder reports non-string keys as syntax errors; be safe
					return nil, &ParseError{Line: p.line(), Msg: "json: object key is not a string"}
				}
				k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: p.line()}
				vt, err := p.dec.Token()
				if err != nil {
					return nil, p.err(err)
				}
				v, err := p.value(vt, depth+1)
				if err != nil {
					return nil, err
				}
				m.Content = append(m.Content, k, v)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, p.err(err)
			}
			return m, nil
		}
		// '[' (the decoder never returns a closing delimiter here)
		s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line}
		for p.dec.More() {
			et, err := p.dec.Token()
			if err != nil {
				return nil, p.err(err)
			}
			e, err := p.value(et, depth+1)
			if err != nil {
				return nil, err
			}
			s.Content = append(s.Content, e)
		}
		if _, err := p.dec.Token(); err != nil {
			return nil, p.err(err)
		}
		return s, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Line: line}, nil
	case json.Number:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: t.String(), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
	return nil, &ParseError{Line: line, Msg: fmt.Sprintf("json: unexpected token %v", tok)}
}

// nestedNode is the nested layout of one node, for Encode.
type nestedNode struct {
	ID       string        `json:"id" yaml:"id"`
	Type     string        `json:"type" yaml:"type"`
	Children []*nestedNode `json:"children,omitempty" yaml:"children,omitempty"`
}

type nestedFile struct {
	Project string      `json:"project" yaml:"project"`
	Root    *nestedNode `json:"root" yaml:"root"`
}

type flatFile struct {
	Project string `json:"project" yaml:"project"`
	Nodes   []Node `json:"nodes" yaml:"nodes"`
}

// Encode writes t in a format (FormatAuto means YAML) and layout that Parse reads back to the
// same tree. The nested layout holds trees of at most MaxNestedDepth levels.
func Encode(t *Tree, f Format, l Layout) ([]byte, error) {
	var v any
	if l == Flat {
		v = flatFile{Project: t.project, Nodes: t.Nodes()}
	} else {
		if t.Height() > MaxNestedDepth {
			return nil, fmt.Errorf("tree is %d levels deep, the nested layout holds %d: use the flat layout", t.Height(), MaxNestedDepth)
		}
		all := make([]nestedNode, t.Len())
		for i := range all {
			nd := t.node(int32(i))
			all[i] = nestedNode{ID: nd.ID, Type: nd.Type}
			if cs := t.childIdx[t.childOff[i]:t.childOff[i+1]]; len(cs) > 0 {
				all[i].Children = make([]*nestedNode, len(cs))
				for k, c := range cs {
					all[i].Children[k] = &all[c]
				}
			}
		}
		v = nestedFile{Project: t.project, Root: &all[t.root]}
	}
	if f == FormatJSON {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode json: %w", err)
		}
		return append(b, '\n'), nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteText writes t as an indented outline, one node a line: "id (type)", two spaces of
// indentation per level, and for parents the number of leaves under them:
//
//	demo (project) leaves=3
//	  g01 (group) leaves=3
//	    g01-s0001 (server)
func (t *Tree) WriteText(w io.Writer) error {
	var buf bytes.Buffer
	stack := []int32{t.root}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for range t.depth[i] {
			buf.WriteString("  ")
		}
		nd := t.node(i)
		buf.WriteString(nd.ID)
		buf.WriteString(" (")
		buf.WriteString(nd.Type)
		buf.WriteString(")")
		cs := t.childIdx[t.childOff[i]:t.childOff[i+1]]
		if len(cs) > 0 {
			fmt.Fprintf(&buf, " leaves=%d", t.leaves[i])
		}
		buf.WriteByte('\n')
		for k := len(cs) - 1; k >= 0; k-- {
			stack = append(stack, cs[k])
		}
		if buf.Len() > 64<<10 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}
