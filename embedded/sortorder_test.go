package embedded_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestSortedFindRandom cross-checks finds sorted on one field, with and without a limit,
// against a naive filter and sort in Go, on collections whose indexes make the server read
// in index order (a range on the field after an equality prefix) and on ones where it must
// sort (numbers, several ranges, an array value making the index multikey). Ties on the sort
// field may come in any order, so the sequences of sort values are compared, and the sets of
// documents without a limit.
func TestSortedFindRandom(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(7, 14))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	value := func(kind int, i int) any {
		switch kind {
		case 0:
			return bson.NewDateTimeFromTime(base.Add(time.Duration(i) * 5 * time.Minute))
		case 1:
			return fmt.Sprintf("s%03d", i)
		case 2:
			return int64(i)
		default:
			return bson.Timestamp{T: uint32(1000 + i), I: uint32(i % 3)}
		}
	}
	for round := range 12 {
		coll := e.db.Collection(fmt.Sprintf("c%d", round))
		if _, err := coll.Indexes().CreateOne(e.ctx, mongoIndex(bson.D{{Key: "p", Value: 1}, {Key: "t", Value: 1}})); err != nil {
			t.Fatal(err)
		}
		kind := round % 4
		var docs []sortDoc
		var batch []any
		for i := range 300 {
			d := sortDoc{ID: i, P: fmt.Sprintf("p%d", rng.IntN(3)), T: value(kind, rng.IntN(60))}
			if rng.IntN(20) == 0 {
				d.T = value((kind+1)%4, rng.IntN(60)) // another type now and then
			}
			docs = append(docs, d)
			batch = append(batch, bson.D{{Key: "_id", Value: d.ID}, {Key: "p", Value: d.P}, {Key: "t", Value: d.T}})
		}
		if round >= 8 {
			// An array value: the index becomes multikey, and the server must sort.
			batch = append(batch, bson.D{{Key: "_id", Value: 1000}, {Key: "p", Value: "p9"}, {Key: "t", Value: bson.A{value(kind, 1), value(kind, 2)}}})
		}
		if _, err := coll.InsertMany(e.ctx, batch); err != nil {
			t.Fatal(err)
		}
		for q := range 40 {
			lo, hi := rng.IntN(60), rng.IntN(60)
			if lo > hi {
				lo, hi = hi, lo
			}
			p := fmt.Sprintf("p%d", rng.IntN(3))
			filter := bson.D{{Key: "p", Value: p}, {Key: "t", Value: bson.D{{Key: "$gte", Value: value(kind, lo)}, {Key: "$lt", Value: value(kind, hi)}}}}
			if q%5 == 4 {
				filter[0].Value = bson.D{{Key: "$in", Value: bson.A{"p0", "p1"}}} // several ranges
			}
			dir := 1
			if rng.IntN(2) == 0 {
				dir = -1
			}
			limit := int64(rng.IntN(8))
			var want []sortDoc
			for _, d := range docs {
				okP := d.P == p
				if q%5 == 4 {
					okP = d.P == "p0" || d.P == "p1"
				}
				if okP && sameKind(d.T, value(kind, 0)) && !less(d.T, value(kind, lo)) && less(d.T, value(kind, hi)) {
					want = append(want, d)
				}
			}
			slices.SortStableFunc(want, func(a, b sortDoc) int {
				if less(a.T, b.T) {
					return -dir
				}
				if less(b.T, a.T) {
					return dir
				}
				return 0
			})
			if limit > 0 && int64(len(want)) > limit {
				want = want[:limit]
			}
			cur, err := coll.Find(e.ctx, filter, options.Find().SetSort(bson.D{{Key: "t", Value: dir}}).SetLimit(limit))
			if err != nil {
				t.Fatal(err)
			}
			var got []sortDoc
			if err := cur.All(e.ctx, &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("round %d query %d %v sort %d limit %d: %d documents, want %d", round, q, filter, dir, limit, len(got), len(want))
			}
			for i := range got {
				if fmt.Sprint(got[i].T) != fmt.Sprint(want[i].T) {
					t.Fatalf("round %d query %d %v sort %d limit %d: position %d has t=%v, want %v", round, q, filter, dir, limit, i, got[i].T, want[i].T)
				}
			}
			if limit == 0 {
				gotIDs, wantIDs := idsOf(got), idsOf(want)
				if !slices.Equal(gotIDs, wantIDs) {
					t.Fatalf("round %d query %d: documents %v, want %v", round, q, gotIDs, wantIDs)
				}
			}
		}
	}
}

// sortDoc is a document of TestSortedFindRandom.
type sortDoc struct {
	ID int    `bson:"_id"`
	P  string `bson:"p"`
	T  any    `bson:"t"`
}

func idsOf(ds []sortDoc) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	slices.Sort(out)
	return out
}

// sameKind reports whether a and b have the same Go type (one BSON type here).
func sameKind(a, b any) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }

// less orders two values of the same kind (dates, strings, int64, timestamps) as MongoDB does.
func less(a, b any) bool {
	switch x := a.(type) {
	case bson.DateTime:
		return x < b.(bson.DateTime)
	case string:
		return x < b.(string)
	case int64:
		return x < b.(int64)
	case bson.Timestamp:
		y := b.(bson.Timestamp)
		return x.T < y.T || x.T == y.T && x.I < y.I
	}
	panic(fmt.Sprintf("less: %T", a))
}

func mongoIndex(keys bson.D) mongo.IndexModel { return mongo.IndexModel{Keys: keys} }
