package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// Projection error codes (mongod's projection_ast parser).
const (
	codeProjectionPathCollision = 31250
	codeInclusionInExclusion    = 31253
	codeExclusionInInclusion    = 31254
	codeEmptySubProjection      = 51270
)

// Projection is a compiled find projection: inclusion ({a: 1, "b.c": 1}) or exclusion
// ({a: 0}); _id is included unless excluded explicitly. It is immutable and safe for
// concurrent use.
type Projection struct {
	inclusion bool
	root      *projNode
	identity  bool
}

type projNode struct {
	names    []string
	children []*projNode
	leaf     bool
}

func (n *projNode) child(name string) *projNode {
	for i, nm := range n.names {
		if nm == name {
			return n.children[i]
		}
	}
	return nil
}

// CompileProjection compiles a find projection. Mixing inclusion and exclusion (other than
// of _id) fails with 31254/31253 as mongod 4.4+; $slice, $elemMatch, $meta, positional
// paths and expression values are NotImplemented.
func CompileProjection(proj bson.D) (*Projection, error) {
	if len(proj) == 0 {
		return &Projection{identity: true}, nil
	}
	type spec struct {
		path    string
		include bool
	}
	var specs []spec
	var flatten func(prefix string, d bson.D) error
	flatten = func(prefix string, d bson.D) error {
		for _, e := range d {
			path := prefix + e.Key
			if strings.HasPrefix(e.Key, "$") {
				return mongoerr.NotImplementedf("projection operator %s", e.Key)
			}
			if e.Key == "" || strings.HasSuffix(path, ".") || strings.Contains(path, "..") || strings.HasPrefix(path, ".") {
				return mongoerr.New(mongoerr.Location40352, "FieldPath cannot be constructed with empty string")
			}
			for _, part := range splitPath(path) {
				if strings.HasPrefix(part, "$") {
					return mongoerr.NotImplementedf("positional projection '%s'", path)
				}
			}
			switch v := e.Value.(type) {
			case bool, int32, int64, float64, int:
				specs = append(specs, spec{path, bsonval.Truthy(v)})
			case bson.Decimal128:
				specs = append(specs, spec{path, bsonval.Truthy(v)})
			case bson.D:
				if len(v) == 0 {
					return mongoerr.New(codeEmptySubProjection, "An empty sub-projection is not a valid value. Found empty object at path")
				}
				if strings.HasPrefix(v[0].Key, "$") {
					return mongoerr.NotImplementedf("projection operator %s", v[0].Key)
				}
				if err := flatten(path+".", v); err != nil {
					return err
				}
			default:
				return mongoerr.NotImplementedf("projection of a literal or expression value (field '%s')", path)
			}
		}
		return nil
	}
	if err := flatten("", proj); err != nil {
		return nil, err
	}
	p := &Projection{root: &projNode{}}
	modeSet := false
	idInclude := true
	for _, s := range specs {
		if s.path == "_id" {
			idInclude = s.include
			continue
		}
		if !modeSet {
			p.inclusion, modeSet = s.include, true
		} else if s.include != p.inclusion {
			if p.inclusion {
				return nil, mongoerr.New(codeExclusionInInclusion, "Cannot do exclusion on field %s in inclusion projection", s.path)
			}
			return nil, mongoerr.New(codeInclusionInExclusion, "Cannot do inclusion on field %s in exclusion projection", s.path)
		}
	}
	if !modeSet {
		// Only _id was given: {_id: 0} excludes it, {_id: 1} keeps only it.
		p.inclusion = idInclude
	}
	for _, s := range specs {
		if s.path == "_id" {
			continue
		}
		if err := p.root.add(splitPath(s.path), s.path); err != nil {
			return nil, err
		}
	}
	if idInclude == p.inclusion && p.root.child("_id") == nil {
		p.root.names = append(p.root.names, "_id")
		p.root.children = append(p.root.children, &projNode{leaf: true})
	}
	return p, nil
}

func (n *projNode) add(parts []string, path string) error {
	cur := n
	for i, part := range parts {
		c := cur.child(part)
		switch {
		case c == nil:
			c = &projNode{}
			cur.names = append(cur.names, part)
			cur.children = append(cur.children, c)
		case c.leaf:
			return mongoerr.New(codeProjectionPathCollision, "Path collision at %s remaining portion %s", path, strings.Join(parts[i+1:], "."))
		case i == len(parts)-1:
			return mongoerr.New(codeProjectionPathCollision, "Path collision at %s", path)
		}
		cur = c
	}
	cur.leaf = true
	return nil
}

// ApplyRaw returns the projection of the stored BSON document raw, as BSON: the bytes of Apply's
// result for raw decoded, reading no more of raw than the projection needs. A projection of
// whole top-level fields copies their elements without decoding them; an inclusion of sub-paths
// decodes only the top-level fields it names; only an exclusion of sub-paths decodes the whole
// document. The result may share raw's bytes (a nil or empty projection returns raw).
func (p *Projection) ApplyRaw(raw []byte) ([]byte, error) {
	if p == nil || p.identity {
		return raw, nil
	}
	if p.flat() {
		return bsonval.SelectFields(raw, p.root.names, p.inclusion)
	}
	var doc bson.D
	var err error
	if p.inclusion {
		doc, err = bsonval.DecodeFields(raw, p.root.names)
	} else {
		doc, err = bsonval.Decode(raw)
	}
	if err != nil {
		return nil, err
	}
	return bsonval.Encode(p.Apply(doc))
}

// flat reports whether the projection names only whole top-level fields.
func (p *Projection) flat() bool {
	for _, c := range p.root.children {
		if !c.leaf {
			return false
		}
	}
	return true
}

// Apply returns the projected document; doc is not modified.
func (p *Projection) Apply(doc bson.D) bson.D {
	if p == nil || p.identity {
		return doc
	}
	if p.inclusion {
		return includeDoc(p.root, doc)
	}
	return excludeDoc(p.root, doc)
}

func includeDoc(n *projNode, d bson.D) bson.D {
	out := bson.D{}
	for _, e := range d {
		c := n.child(e.Key)
		if c == nil {
			continue
		}
		if c.leaf {
			out = append(out, e)
			continue
		}
		switch v := e.Value.(type) {
		case bson.D:
			out = append(out, bson.E{Key: e.Key, Value: includeDoc(c, v)})
		case bson.A:
			out = append(out, bson.E{Key: e.Key, Value: includeArray(c, v)})
		}
	}
	return out
}

func includeArray(n *projNode, a bson.A) bson.A {
	out := bson.A{}
	for _, x := range a {
		switch v := x.(type) {
		case bson.D:
			out = append(out, includeDoc(n, v))
		case bson.A:
			out = append(out, includeArray(n, v))
		}
	}
	return out
}

func excludeDoc(n *projNode, d bson.D) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		c := n.child(e.Key)
		switch {
		case c == nil:
			out = append(out, e)
		case c.leaf:
		default:
			switch v := e.Value.(type) {
			case bson.D:
				out = append(out, bson.E{Key: e.Key, Value: excludeDoc(c, v)})
			case bson.A:
				out = append(out, bson.E{Key: e.Key, Value: excludeArray(c, v)})
			default:
				out = append(out, e)
			}
		}
	}
	return out
}

func excludeArray(n *projNode, a bson.A) bson.A {
	out := make(bson.A, 0, len(a))
	for _, x := range a {
		switch v := x.(type) {
		case bson.D:
			out = append(out, excludeDoc(n, v))
		case bson.A:
			out = append(out, excludeArray(n, v))
		default:
			out = append(out, x)
		}
	}
	return out
}
