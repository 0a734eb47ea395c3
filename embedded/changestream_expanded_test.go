package embedded_test

import (
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestExpandedEvents: with showExpandedEvents a stream also reports DDL events (create,
// createIndexes, dropIndexes, modify, rename with its operationDescription), every event
// carries collectionUUID, and updates spell out ambiguous paths (disambiguatedPaths).
func TestExpandedEvents(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, csDoc("_id", 1, "a", csDoc("1", 1), "arr", bson.A{csDoc("1", 1)})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Collection("target").InsertOne(e.ctx, csDoc("_id", "t")); err != nil {
		t.Fatal(err)
	}
	expanded := watch(t, e, e.db, nil, options.ChangeStream().SetShowExpandedEvents(true))
	classic := watch(t, e, e.db, nil)

	if err := e.db.CreateCollection(e.ctx, "made"); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: csDoc("x", 1), Options: options.Index().SetName("x_1")}); err != nil {
		t.Fatal(err)
	}
	if err := coll.Indexes().DropOne(e.ctx, "x_1"); err != nil {
		t.Fatal(err)
	}
	if err := e.db.RunCommand(e.ctx, csDoc("collMod", "c")).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(e.ctx, csDoc("_id", 1), csDoc("$set", csDoc("a.1", 2, "arr.0.1", 2, "plain", 1))); err != nil {
		t.Fatal(err)
	}
	if err := rename(e, "c", "target", true); err != nil {
		t.Fatal(err)
	}

	var uuid any
	for _, want := range []string{"create made", "createIndexes c", "dropIndexes c", "modify c", "update c", "rename c"} {
		ev := nextRaw(t, e, expanded)
		if got := fmt.Sprint(get(ev, "operationType"), " ", get(ev, "ns.coll")); got != want {
			t.Fatalf("expanded event %v, want %s", ev, want)
		}
		u, ok := get(ev, "collectionUUID").(bson.Binary)
		if !ok || u.Subtype != 4 {
			t.Errorf("%s: collectionUUID = %v", want, get(ev, "collectionUUID"))
		}
		if get(ev, "ns.coll") == "c" {
			if uuid != nil && fmt.Sprint(uuid) != fmt.Sprint(u) {
				t.Errorf("%s: collectionUUID %v, earlier events %v", want, u, uuid)
			}
			uuid = u
		}
		switch want {
		case "create made":
			if get(ev, "operationDescription.idIndex.name") != "_id_" {
				t.Errorf("create operationDescription = %v", get(ev, "operationDescription"))
			}
		case "createIndexes c", "dropIndexes c":
			ixs, _ := get(ev, "operationDescription.indexes").(bson.A)
			if len(ixs) != 1 || get(ixs[0].(bson.D), "name") != "x_1" || fmt.Sprint(get(ixs[0].(bson.D), "key")) != fmt.Sprint(csDoc("x", int32(1))) {
				t.Errorf("%s operationDescription = %v", want, get(ev, "operationDescription"))
			}
		case "update c":
			paths := get(ev, "updateDescription.disambiguatedPaths")
			wantPaths := csDoc("a.1", bson.A{"a", "1"}, "arr.0.1", bson.A{"arr", int32(0), "1"})
			if fmt.Sprint(paths) != fmt.Sprint(wantPaths) {
				t.Errorf("disambiguatedPaths = %v, want %v", paths, wantPaths)
			}
		case "rename c":
			if fmt.Sprint(get(ev, "operationDescription.to")) != fmt.Sprint(csDoc("db", e.db.Name(), "coll", "target")) {
				t.Errorf("rename operationDescription = %v", get(ev, "operationDescription"))
			}
			if _, ok := get(ev, "operationDescription.dropTarget").(bson.Binary); !ok {
				t.Errorf("rename over an existing collection: operationDescription = %v, want dropTarget", get(ev, "operationDescription"))
			}
		}
	}
	// A stream without showExpandedEvents sees the classic events only, and none of the
	// expanded fields.
	for _, want := range []string{"update", "rename"} {
		ev := nextRaw(t, e, classic)
		if get(ev, "operationType") != want {
			t.Fatalf("classic event %v, want %s", ev, want)
		}
		for _, field := range []string{"collectionUUID", "operationDescription", "updateDescription.disambiguatedPaths"} {
			if v := get(ev, field); v != nil {
				t.Errorf("classic %s event has %s = %v", want, field, v)
			}
		}
	}
}

// TestChangeStreamPipelineErrors: the errors MongoDB answers for change stream pipelines
// and resume options.
func TestChangeStreamPipelineErrors(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, csDoc("_id", 0)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		pipeline mongo.Pipeline
		code     int
	}{
		{"unknown stage", mongo.Pipeline{csDoc("$unsupported", "foo")}, 40324},
		{"stage not allowed", mongo.Pipeline{csDoc("$group", csDoc("_id", nil))}, 20},
		{"$lookup not allowed", mongo.Pipeline{csDoc("$lookup", csDoc("from", "x", "localField", "a", "foreignField", "b", "as", "y"))}, 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := coll.Watch(e.ctx, tt.pipeline)
			if code := serverCode(err); code != tt.code {
				t.Fatalf("watch = %v, want code %d", err, tt.code)
			}
		})
	}

	t.Run("modified _id ends the stream with ChangeStreamFatalError", func(t *testing.T) {
		cs := watch(t, e, coll, mongo.Pipeline{csDoc("$project", csDoc("_id", 0))})
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", 1)); err != nil {
			t.Fatal(err)
		}
		if cs.Next(e.ctx) {
			t.Fatalf("event %v, want an error", cs.Current)
		}
		var se mongo.ServerError
		if code := serverCode(cs.Err()); code != 280 || !errors.As(cs.Err(), &se) || !se.HasErrorLabel("NonResumableChangeStreamError") {
			t.Fatalf("stream error %v, want ChangeStreamFatalError (280) labelled NonResumableChangeStreamError", cs.Err())
		}
	})

	t.Run("resume options", func(t *testing.T) {
		cs := watch(t, e, coll, nil)
		if err := coll.Drop(e.ctx); err != nil {
			t.Fatal(err)
		}
		var invalidate bson.Raw
		for invalidate == nil {
			ev := nextRaw(t, e, cs)
			if get(ev, "operationType") == "invalidate" {
				invalidate = cs.ResumeToken()
			}
		}
		_, err := coll.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(invalidate))
		if code := serverCode(err); code != 260 {
			t.Errorf("resumeAfter an invalidate: %v, want InvalidResumeToken (260)", err)
		}
		after, err := coll.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invalidate))
		if err != nil {
			t.Errorf("startAfter an invalidate: %v", err)
		} else {
			_ = after.Close(e.ctx)
		}
		_, err = coll.Watch(e.ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invalidate).SetResumeAfter(invalidate))
		if code := serverCode(err); code != 50865 {
			t.Errorf("resumeAfter and startAfter: %v, want 50865", err)
		}
	})
}
