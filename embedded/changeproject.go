package embedded

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// rawProjection is a stream's last stage when it is an inclusion $project that the raw path
// applies while it builds a document event (see rawDocEvent), so that a consumer that asks
// for a few fields of the post-image (rollup's watcher) keeps the raw path and the events
// sent stay small: top-level fields of the event kept whole, and fields of fullDocument. The
// event's _id (the resume token) is always kept. Other $project forms (exclusions,
// expressions, deeper paths, $project before a $match) take the decoded path, which gives
// the same bytes for these (TestRawChangeEventsMatchDecoded).
type rawProjection struct {
	top  map[string]bool // top-level fields kept whole
	full map[string]bool // fields of fullDocument kept (fullDocument itself not in top)
}

// newRawProjection returns the raw form of a $project stage, or nil when it has another form.
func newRawProjection(st bson.D) *rawProjection {
	if len(st) != 1 || st[0].Key != "$project" {
		return nil
	}
	spec, ok := st[0].Value.(bson.D)
	if !ok || len(spec) == 0 {
		return nil
	}
	p := &rawProjection{top: map[string]bool{}, full: map[string]bool{}}
	for _, e := range spec {
		if !includes(e.Value) || e.Key == "" || strings.HasPrefix(e.Key, "$") {
			return nil
		}
		head, field, dotted := strings.Cut(e.Key, ".")
		switch {
		case !dotted:
			p.top[e.Key] = true
		case head == "fullDocument" && field != "" && !strings.ContainsAny(field, ".$"):
			p.full[field] = true
		default:
			return nil
		}
	}
	if p.top["fullDocument"] && len(p.full) > 0 {
		return nil // a path collision: the decoded path answers its error
	}
	return p
}

// includes reports whether a projection value is a plain inclusion (true or a non-zero
// number); anything else (exclusions, expressions, $-operators) is left to the decoded path.
func includes(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int:
		return x != 0
	case int32:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	}
	return false
}

// keeps reports whether the event's top-level field name is kept.
func (p *rawProjection) keeps(name string) bool {
	return p == nil || name == "_id" || p.top[name]
}

// appendFullDocument appends the event's fullDocument (full; nil: null) as p keeps it: whole,
// as the fields p.full names (in the document's order; {} when it has none of them), or not
// at all (not kept, or a null that a sub-field projection drops).
func (p *rawProjection) appendFullDocument(dst []byte, full bson.Raw) ([]byte, bool) {
	switch {
	case p.keeps("fullDocument"):
		if full == nil {
			return bsoncore.AppendNullElement(dst, "fullDocument"), true
		}
		return bsoncore.AppendDocumentElement(dst, "fullDocument", full), true
	case len(p.full) == 0 || full == nil:
		return dst, true
	}
	if len(full) < 5 {
		return dst, false
	}
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "fullDocument")
	idx, dst := bsoncore.ReserveLength(dst)
	rest := []byte(full[4 : len(full)-1])
	for len(rest) > 0 {
		el, r, ok := bsoncore.ReadElement(rest)
		if !ok {
			return dst, false
		}
		if p.full[string(el.KeyBytes())] {
			dst = append(dst, el...)
		}
		rest = r
	}
	return endDocument(dst, idx), true
}
