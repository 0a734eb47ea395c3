package embedded_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// typed renders a value with its Go (BSON) type at every level, so tests check numeric result
// types ($sum of int32 is int32, $avg is double) and not just values. Arrays whose order
// MongoDB leaves unspecified can be sorted first with sortedA.
func typed(v any) string {
	switch x := v.(type) {
	case bson.D:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = e.Key + ":" + typed(e.Value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case bson.A:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = typed(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
}

// sortedA marks an array whose element order is unspecified (e.g. $addToSet).
func sortedA(d bson.D, field string) {
	for i, e := range d {
		if e.Key == field {
			if a, ok := e.Value.(bson.A); ok {
				sort.Slice(a, func(i, j int) bool { return typed(a[i]) < typed(a[j]) })
				d[i].Value = a
			}
		}
	}
}

func TestAggregate(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("sales")
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "item", Value: "a"}, {Key: "qty", Value: int32(2)}, {Key: "price", Value: 1.5}, {Key: "tags", Value: bson.A{"x", "y"}}},
		bson.D{{Key: "_id", Value: 2}, {Key: "item", Value: "a"}, {Key: "qty", Value: int32(3)}, {Key: "price", Value: 2.5}, {Key: "tags", Value: bson.A{"x"}}},
		bson.D{{Key: "_id", Value: 3}, {Key: "item", Value: "b"}, {Key: "qty", Value: int32(5)}, {Key: "price", Value: int32(10)}, {Key: "tags", Value: bson.A{}}},
		bson.D{{Key: "_id", Value: 4}, {Key: "item", Value: "a"}, {Key: "qty", Value: int32(0)}, {Key: "price", Value: int32(9)}, {Key: "tags", Value: "z"}},
		bson.D{{Key: "_id", Value: 5}, {Key: "item", Value: "b"}, {Key: "qty", Value: int32(5)}, {Key: "price", Value: 1.25}},
		bson.D{{Key: "_id", Value: 6}, {Key: "item", Value: "c"}, {Key: "qty", Value: int64(7)}, {Key: "price", Value: int32(3)}, {Key: "tags", Value: bson.A{"y", "x", "w"}}},
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	D := func(kv ...any) bson.D {
		var d bson.D
		for i := 0; i < len(kv); i += 2 {
			d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return d
	}
	tests := []struct {
		name      string
		pipeline  bson.A
		batchSize int32
		unordered []string // array fields whose order is unspecified
		want      []bson.D
	}{
		{
			name: "group all accumulators",
			pipeline: bson.A{
				D("$match", D("qty", D("$gt", 0))),
				D("$sort", D("_id", 1)),
				D("$group", D(
					"_id", "$item",
					"total", D("$sum", "$qty"),
					"n", D("$sum", 1),
					"avgQty", D("$avg", "$qty"),
					"minP", D("$min", "$price"),
					"maxP", D("$max", "$price"),
					"first", D("$first", "$_id"),
					"last", D("$last", "$_id"),
					"all", D("$push", "$_id"),
					"set", D("$addToSet", "$qty"),
					"cnt", D("$count", bson.D{}),
				)),
				D("$sort", D("_id", 1)),
			},
			unordered: []string{"set"},
			want: []bson.D{
				D("_id", "a", "total", int32(5), "n", int32(2), "avgQty", 2.5, "minP", 1.5, "maxP", 2.5,
					"first", int32(1), "last", int32(2), "all", bson.A{int32(1), int32(2)}, "set", bson.A{int32(2), int32(3)}, "cnt", int32(2)),
				D("_id", "b", "total", int32(10), "n", int32(2), "avgQty", 5.0, "minP", 1.25, "maxP", int32(10),
					"first", int32(3), "last", int32(5), "all", bson.A{int32(3), int32(5)}, "set", bson.A{int32(5)}, "cnt", int32(2)),
				D("_id", "c", "total", int64(7), "n", int32(1), "avgQty", 7.0, "minP", int32(3), "maxP", int32(3),
					"first", int32(6), "last", int32(6), "all", bson.A{int32(6)}, "set", bson.A{int64(7)}, "cnt", int32(1)),
			},
		},
		{
			name: "group null id and mixed sum",
			pipeline: bson.A{
				D("$group", D("_id", nil, "qty", D("$sum", "$qty"), "price", D("$sum", "$price"), "missing", D("$sum", "$nope"), "avgMissing", D("$avg", "$nope"))),
			},
			want: []bson.D{D("_id", nil, "qty", int64(22), "price", 27.25, "missing", int32(0), "avgMissing", nil)},
		},
		{
			name: "unwind group sort skip limit",
			pipeline: bson.A{
				D("$unwind", "$tags"),
				D("$group", D("_id", "$tags", "n", D("$sum", 1))),
				D("$sort", D("n", -1, "_id", 1)),
				D("$skip", 1),
				D("$limit", 2),
			},
			batchSize: 1,
			want:      []bson.D{D("_id", "y", "n", int32(2)), D("_id", "w", "n", int32(1))},
		},
		{
			name: "project computed fields",
			pipeline: bson.A{
				D("$match", D("_id", D("$lte", 2))),
				D("$project", D("_id", 0, "item", 1, "total", D("$multiply", bson.A{"$qty", "$price"}), "q", "$qty")),
				D("$sort", D("total", 1)),
			},
			want: []bson.D{D("item", "a", "total", 3.0, "q", int32(2)), D("item", "a", "total", 7.5, "q", int32(3))},
		},
		{
			name:     "count",
			pipeline: bson.A{D("$match", D("item", "a")), D("$count", "num")},
			want:     []bson.D{D("num", int32(3))},
		},
		{
			name:     "count of nothing",
			pipeline: bson.A{D("$match", D("item", "none")), D("$count", "num")},
			want:     nil,
		},
		{
			name: "unwind preserve and index",
			pipeline: bson.A{
				D("$match", D("_id", D("$in", bson.A{3, 5, 6}))),
				D("$sort", D("_id", 1)),
				D("$unwind", D("path", "$tags", "preserveNullAndEmptyArrays", true, "includeArrayIndex", "i")),
				D("$project", D("tags", 1, "i", 1)),
			},
			want: []bson.D{
				D("_id", int32(3), "i", nil),
				D("_id", int32(5), "i", nil),
				D("_id", int32(6), "tags", "y", "i", int64(0)),
				D("_id", int32(6), "tags", "x", "i", int64(1)),
				D("_id", int32(6), "tags", "w", "i", int64(2)),
			},
		},
		{
			name: "match on array element and sort on array",
			pipeline: bson.A{
				D("$match", D("tags", "x")),
				D("$sort", D("_id", -1)),
				D("$project", D("_id", 1)),
			},
			want: []bson.D{D("_id", int32(6)), D("_id", int32(2)), D("_id", int32(1))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := options.Aggregate()
			if tc.batchSize > 0 {
				opts.SetBatchSize(tc.batchSize)
			}
			cur, err := coll.Aggregate(e.ctx, tc.pipeline, opts)
			if err != nil {
				t.Fatalf("aggregate: %v", err)
			}
			var got []bson.D
			if err := cur.All(e.ctx, &got); err != nil {
				t.Fatalf("all: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d docs %v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				for _, f := range tc.unordered {
					sortedA(got[i], f)
					sortedA(tc.want[i], f)
				}
				if typed(got[i]) != typed(tc.want[i]) {
					t.Errorf("doc %d\n got %s\nwant %s", i, typed(got[i]), typed(tc.want[i]))
				}
			}
		})
	}
}
