package query

import "github.com/gameops/rollup/embedded/bsonval"

// formatValue renders a decoded value the way mongod's BSONElement::toString does in error
// messages: strings quoted, numbers plain, documents as { a: 1 } and arrays as [ 1, 2 ].
func formatValue(v any) string { return bsonval.Format(v) }

// formatElem renders "{key: value}" as mongod does for one element wrapped in braces.
func formatElem(key string, v any) string {
	return "{" + key + ": " + formatValue(v) + "}"
}

// typeName returns MongoDB's alias of a value's BSON type.
func typeName(v any) string { return bsonval.TypeName(v) }
