package embedded_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestChangeStreamProbeShowsTheSameEvents cross-checks the probe (a stream's first $match run
// on an event of the few fields it reads, before the event is decoded) against the full
// evaluation: each filter opens two streams, one with the filter as its first $match (probed)
// and one with the same filter and'ed with a condition on _id, which every event meets but
// which no probe can read; after random inserts, updates, replaces and deletes both must
// have shown the same events, byte for byte, and end with the same resume token.
func TestChangeStreamProbeShowsTheSameEvents(t *testing.T) {
	store := embeddedtest.Start(t, embeddedtest.Options{})
	store.SkipIfReal(t) // the probe is the embedded server's; a real server has none to check
	ctx := csCtx(t)
	c := store.Client(t)
	db := c.Database("probe")
	coll := db.Collection("c")
	other := db.Collection("c2")
	filters := map[string]bson.D{
		"rollup's leaf filter": {{Key: "$or", Value: bson.A{
			bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}}, {Key: "fullDocument.rollup", Value: bson.D{{Key: "$ne", Value: true}}}},
			bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"invalidate", "drop", "rename", "dropDatabase"}}}}},
		}}},
		"project in":         {{Key: "fullDocument.project", Value: bson.D{{Key: "$in", Value: bson.A{"a"}}}}},
		"deletes":            {{Key: "operationType", Value: "delete"}},
		"n over 50":          {{Key: "fullDocument.n", Value: bson.D{{Key: "$gt", Value: 50}}}, {Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "replace", "update"}}}}},
		"nor rollup":         {{Key: "$nor", Value: bson.A{bson.D{{Key: "fullDocument.rollup", Value: true}}}}},
		"nested path":        {{Key: "fullDocument.children.k1", Value: bson.D{{Key: "$exists", Value: true}}}},
		"namespace":          {{Key: "ns.coll", Value: "c"}},
		"missing document":   {{Key: "fullDocument", Value: nil}},
		"comment and equals": {{Key: "$comment", Value: "x"}, {Key: "fullDocument.project", Value: "b"}},
	}
	type pair struct {
		name   string
		probed *mongo.ChangeStream
		full   *mongo.ChangeStream
	}
	var pairs []pair
	for name, f := range filters {
		for _, lookup := range []bool{false, true} {
			o := options.ChangeStream().SetMaxAwaitTime(50 * time.Millisecond)
			if lookup {
				o.SetFullDocument(options.UpdateLookup)
			}
			probed, err := db.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: f}}}, o)
			if err != nil {
				t.Fatal(err)
			}
			full, err := db.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$and", Value: bson.A{
				f, bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: true}}}},
			}}}}}}, o)
			if err != nil {
				t.Fatal(err)
			}
			pairs = append(pairs, pair{name: fmt.Sprintf("%s, updateLookup %v", name, lookup), probed: probed, full: full})
		}
	}
	defer func() {
		for _, p := range pairs {
			_ = p.probed.Close(ctx)
			_ = p.full.Close(ctx)
		}
	}()

	r := rand.New(rand.NewPCG(3, 5))
	doc := func(id int) bson.D {
		d := bson.D{{Key: "_id", Value: id}, {Key: "n", Value: r.IntN(100)}}
		switch r.IntN(3) {
		case 0:
			d = append(d, bson.E{Key: "rollup", Value: true})
		case 1:
			d = append(d, bson.E{Key: "rollup", Value: false})
		}
		if r.IntN(2) == 0 {
			d = append(d, bson.E{Key: "project", Value: []string{"a", "b"}[r.IntN(2)]})
		}
		if r.IntN(2) == 0 {
			d = append(d, bson.E{Key: "children", Value: bson.D{{Key: fmt.Sprintf("k%d", r.IntN(3)), Value: r.IntN(10)}}})
		}
		return d
	}
	for i := range 400 {
		target := coll
		if r.IntN(5) == 0 {
			target = other
		}
		id := r.IntN(60)
		var err error
		switch r.IntN(4) {
		case 0:
			_, err = target.InsertOne(ctx, doc(1000+i))
		case 1:
			set := bson.D{{Key: "n", Value: r.IntN(100)}}
			if r.IntN(2) == 0 {
				set = append(set, bson.E{Key: "rollup", Value: r.IntN(2) == 0})
			}
			_, err = target.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: set}}, options.UpdateOne().SetUpsert(true))
		case 2:
			d := doc(id)
			_, err = target.ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, d[1:], options.Replace().SetUpsert(true))
		case 3:
			_, err = target.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	drain := func(cs *mongo.ChangeStream) ([]bson.Raw, bson.Raw) {
		var out []bson.Raw
		for empty := 0; empty < 2; {
			if cs.TryNext(ctx) {
				out = append(out, bytes.Clone(cs.Current))
				continue
			}
			if err := cs.Err(); err != nil {
				t.Fatal(err)
			}
			empty++
		}
		return out, bytes.Clone(cs.ResumeToken())
	}
	shown := 0
	for _, p := range pairs {
		got, gotTok := drain(p.probed)
		want, wantTok := drain(p.full)
		if len(got) != len(want) {
			t.Fatalf("%s: %d events probed, %d in full", p.name, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s: event %d differs:\n%v\n%v", p.name, i, got[i], want[i])
			}
		}
		if !bytes.Equal(gotTok, wantTok) {
			t.Fatalf("%s: resume token %v, want %v", p.name, gotTok, wantTok)
		}
		shown += len(got)
	}
	if shown == 0 {
		t.Fatal("no stream showed any event")
	}
}
