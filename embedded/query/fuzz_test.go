package query

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
)

var fuzzDocs = []D{
	{},
	{e("_id", int32(1)), e("a", int32(1)), e("b", A{int32(1), "x", nil, D{e("c", 2.5)}})},
	{e("_id", "k"), e("a", D{e("b", A{D{e("c", int64(3))}, A{int32(1)}})}), e("s", "str")},
	{e("_id", int32(2)), e("a", A{}), e("n", nil), e("x", D{e("0", int32(1))})},
}

func encodeSeed(f *testing.F, d D) []byte {
	f.Helper()
	b, err := bsonval.Encode(d)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func FuzzCompileFilter(f *testing.F) {
	for _, d := range []D{
		{e("a", int32(1))},
		{e("a.b", D{e("$gt", int32(1)), e("$lt", 5.5)})},
		{e("$or", A{D{e("a", nil)}, D{e("b", D{e("$in", A{int32(1), "x", bson.Regex{Pattern: "^a", Options: "i"}})})}})},
		{e("a", D{e("$not", D{e("$exists", true)})}), e("b.0", D{e("$ne", A{int32(1)})})},
		{e("a", D{e("$elemMatch", D{e("c", D{e("$gte", int32(0))})})})},
		{e("a", D{e("$regex", "a$"), e("$options", "ms")})},
		{e("$nor", A{D{e("x.0", D{e("$nin", A{nil})})}})},
	} {
		f.Add(encodeSeed(f, d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		filter, err := bsonval.Decode(data)
		if err != nil {
			return
		}
		cf, err := CompileFilter(filter)
		if err != nil {
			return
		}
		for _, d := range fuzzDocs {
			_, _ = cf.Match(d)
		}
		_, _ = cf.Match(filter)
		if seed, err := UpsertSeed(filter); err == nil {
			if _, err := bsonval.Encode(seed); err != nil {
				t.Fatalf("seed %v does not encode: %v", seed, err)
			}
		}
		if s, err := CompileSort(filter); err == nil {
			for _, d := range fuzzDocs {
				s.Compare(d, filter)
			}
		}
		if p, err := CompileProjection(filter); err == nil {
			for _, d := range append(fuzzDocs[:len(fuzzDocs):len(fuzzDocs)], filter) {
				want, werr := bsonval.Encode(p.Apply(d))
				raw, err := bsonval.Encode(d)
				if werr != nil || err != nil {
					continue
				}
				if got, err := p.ApplyRaw(raw); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("projection %v of %v: ApplyRaw %x (%v), Apply %x", filter, d, got, err, want)
				}
			}
		}
	})
}

func FuzzCompileUpdate(f *testing.F) {
	for _, d := range []D{
		{e("$set", D{e("a.b", int32(1)), e("c", "x")})},
		{e("$inc", D{e("a", int32(1)), e("n", 2.5)}), e("$unset", D{e("s", "")})},
		{e("$push", D{e("b", D{e("$each", A{int32(1), int32(2)})})}), e("$addToSet", D{e("z", "x")})},
		{e("$pull", D{e("b", D{e("$gte", int32(1))})}), e("$min", D{e("a", int32(0))}), e("$max", D{e("m", int32(9))})},
		{e("$set", D{e("b.1", int32(7)), e("a.0.c", int32(1))}), e("$setOnInsert", D{e("q", true)})},
		{e("x", int32(1)), e("_id", int32(1))},
	} {
		f.Add(encodeSeed(f, d), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, isInsert bool) {
		update, err := bsonval.Decode(data)
		if err != nil {
			return
		}
		u, err := CompileUpdate(update)
		if err != nil {
			return
		}
		for _, d := range fuzzDocs {
			before := bsonval.CloneDoc(d)
			out, _, changed, err := u.Apply(d, isInsert)
			if err != nil {
				continue
			}
			if !strictEqual(d, before) {
				t.Fatalf("Apply mutated its input")
			}
			if !changed && !strictEqual(out, d) {
				t.Fatalf("changed=false but %v != %v", out, d)
			}
			if _, err := bsonval.Encode(out); err != nil {
				t.Fatalf("result %v does not encode: %v", out, err)
			}
		}
	})
}
