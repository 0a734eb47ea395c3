package store

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func keyIndex() Index {
	ix, ok := IndexNamed(CountsCollection, CountsKeyIndex)
	if !ok {
		panic("no key index")
	}
	return ix
}

// TestIndexesNamed: every index of the catalog has a name, a collection and a purpose, no
// two share a name on one collection, and the trees' indexes carry MongoDB's default names
// (so the indexes earlier releases built without names are the same indexes).
func TestIndexesNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, ix := range Indexes() {
		if ix.Name == "" || ix.Collection == "" || ix.Purpose == "" || len(ix.Keys) == 0 {
			t.Errorf("incomplete index %+v", ix)
		}
		if seen[ix.Collection+"."+ix.Name] {
			t.Errorf("duplicate index %s.%s", ix.Collection, ix.Name)
		}
		seen[ix.Collection+"."+ix.Name] = true
	}
	for _, want := range []string{"counts." + CountsKeyIndex, "counts." + CountsWrittenAtIndex, "counts." + CountsProjectTickIndex, "tokens." + TokensProjectIndex} {
		if !seen[want] {
			t.Errorf("catalog lacks %s (has %v)", want, seen)
		}
	}
	if ix := keyIndex(); !ix.Unique || DefaultIndexName(ix.Keys) != CountsKeyIndex {
		t.Errorf("key index %+v", ix)
	}
}

func TestIndexMatches(t *testing.T) {
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := func(vals ...any) bson.D {
		names := []string{FieldID, FieldType, FieldTimestamp, "extra"}
		k := bson.D{}
		for i, v := range vals {
			k = append(k, bson.E{Key: names[i], Value: v})
		}
		return k
	}
	tests := []struct {
		name string
		spec bson.D
		want bool
	}{
		{"exact", bson.D{{Key: "key", Value: key(1, 1, 1)}, {Key: "unique", Value: true}}, true},
		{"double and int64 ones", bson.D{{Key: "key", Value: key(1.0, int64(1), int32(1))}, {Key: "unique", Value: true}}, true},
		{"not unique", bson.D{{Key: "key", Value: key(1, 1, 1)}}, false},
		{"unique false", bson.D{{Key: "key", Value: key(1, 1, 1)}, {Key: "unique", Value: false}}, false},
		{"descending", bson.D{{Key: "key", Value: key(1, -1, 1)}, {Key: "unique", Value: true}}, false},
		{"prefix", bson.D{{Key: "key", Value: key(1, 1)}, {Key: "unique", Value: true}}, false},
		{"extra field", bson.D{{Key: "key", Value: key(1, 1, 1, 1)}, {Key: "unique", Value: true}}, false},
		{"sparse", bson.D{{Key: "key", Value: key(1, 1, 1)}, {Key: "unique", Value: true}, {Key: "sparse", Value: true}}, false},
		{"partial", bson.D{{Key: "key", Value: key(1, 1, 1)}, {Key: "unique", Value: true}, {Key: "partialFilterExpression", Value: bson.D{}}}, false},
		{"collation", bson.D{{Key: "key", Value: key(1, 1, 1)}, {Key: "unique", Value: true}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}}}}, false},
		{"hashed", bson.D{{Key: "key", Value: key(1, 1, "hashed")}, {Key: "unique", Value: true}}, false},
	}
	for _, tc := range tests {
		if got := keyIndex().Matches(raw(tc.spec)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
