package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// nextRaw returns the next change event as a document.
func nextRaw(t *testing.T, e env, cs *mongo.ChangeStream) bson.D {
	t.Helper()
	if !cs.Next(e.ctx) {
		t.Fatalf("no next event: %v", cs.Err())
	}
	var d bson.D
	if err := bson.Unmarshal(cs.Current, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func watch(t *testing.T, e env, target interface {
	Watch(ctx context.Context, pipeline any, opts ...options.Lister[options.ChangeStreamOptions]) (*mongo.ChangeStream, error)
}, pipeline mongo.Pipeline, opts ...options.Lister[options.ChangeStreamOptions]) *mongo.ChangeStream {
	t.Helper()
	if pipeline == nil {
		pipeline = mongo.Pipeline{}
	}
	opts = append(opts, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	cs, err := target.Watch(e.ctx, pipeline, opts...)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close(e.ctx) })
	return cs
}

func serverCode(err error) int {
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{13, 20, 26, 47, 48, 260, 280, 40324, 50865} {
			if se.HasErrorCode(c) {
				return c
			}
		}
		return -1
	}
	return 0
}

func rename(e env, from, to string, dropTarget bool) error {
	cmd := csDoc("renameCollection", e.db.Name()+"."+from, "to", e.db.Name()+"."+to)
	if dropTarget {
		cmd = append(cmd, bson.E{Key: "dropTarget", Value: true})
	}
	return e.c.Database("admin").RunCommand(e.ctx, cmd).Err()
}

func TestRenameCollection(t *testing.T) {
	e := newEnv(t)
	src := e.db.Collection("src")
	if _, err := src.InsertMany(e.ctx, []any{csDoc("_id", 1, "k", "a"), csDoc("_id", 2, "k", "b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: csDoc("k", 1), Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Collection("other").InsertOne(e.ctx, csDoc("_id", "o")); err != nil {
		t.Fatal(err)
	}
	srcStream := watch(t, e, src, nil)
	dbStream := watch(t, e, e.db, nil)
	otherStream := watch(t, e, e.db.Collection("other"), nil)

	t.Run("errors", func(t *testing.T) {
		if code := serverCode(rename(e, "nope", "x", false)); code != 26 {
			t.Errorf("rename of a missing collection: code %d, want NamespaceNotFound (26)", code)
		}
		if code := serverCode(rename(e, "src", "other", false)); code != 48 {
			t.Errorf("rename onto an existing collection: code %d, want NamespaceExists (48)", code)
		}
		err := e.db.RunCommand(e.ctx, csDoc("renameCollection", e.db.Name()+".src", "to", e.db.Name()+".x")).Err()
		if code := serverCode(err); code != 13 {
			t.Errorf("renameCollection outside admin: %v, want Unauthorized (13)", err)
		}
	})
	if err := rename(e, "src", "dst", false); err != nil {
		t.Fatalf("rename: %v", err)
	}
	dst := e.db.Collection("dst")
	if n, _ := dst.CountDocuments(e.ctx, bson.D{}); n != 2 {
		t.Errorf("dst holds %d documents, want 2", n)
	}
	if _, err := dst.InsertOne(e.ctx, csDoc("_id", 3, "k", "a")); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("the unique index did not move with the collection: %v", err)
	}
	if err := rename(e, "dst", "other", true); err != nil {
		t.Fatalf("rename with dropTarget: %v", err)
	}
	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	if err != nil || fmt.Sprint(names) != "[other]" {
		t.Errorf("collections = %v, %v; want [other]", names, err)
	}
	if n, _ := e.db.Collection("other").CountDocuments(e.ctx, csDoc("_id", "o")); n != 0 {
		t.Error("the dropped target's document survived")
	}

	ns := func(coll string) bson.D { return csDoc("db", e.db.Name(), "coll", coll) }
	for name, tt := range map[string]struct {
		cs   *mongo.ChangeStream
		want []string
	}{
		"source collection": {srcStream, []string{fmt.Sprint("rename ", ns("src"), " to ", ns("dst")), "invalidate"}},
		"replaced target":   {otherStream, []string{fmt.Sprint("rename ", ns("dst"), " to ", ns("other")), "invalidate"}},
		// createIndexes is not shown (classic events only); a database stream is not
		// invalidated by renames.
		"database": {dbStream, []string{
			fmt.Sprint("rename ", ns("src"), " to ", ns("dst")),
			fmt.Sprint("rename ", ns("dst"), " to ", ns("other")),
		}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, want := range tt.want {
				ev := nextRaw(t, e, tt.cs)
				got := fmt.Sprint(get(ev, "operationType"))
				if got == "rename" {
					got = fmt.Sprint("rename ", get(ev, "ns"), " to ", get(ev, "to"))
				}
				if got != want {
					t.Fatalf("event %v, want %s", ev, want)
				}
			}
		})
	}
}

// TestPreAndPostImages: with changeStreamPreAndPostImages (collMod or create), change events
// carry the post-image of updates (fullDocument whenAvailable/required) and the pre-image of
// updates, replaces and deletes (fullDocumentBeforeChange); without it, whenAvailable gives
// null and required fails the stream.
func TestPreAndPostImages(t *testing.T) {
	e := newEnv(t)
	on, off := e.db.Collection("on"), e.db.Collection("off")
	if err := e.db.CreateCollection(e.ctx, "on", options.CreateCollection().SetChangeStreamPreAndPostImages(csDoc("enabled", true))); err != nil {
		t.Fatal(err)
	}
	if err := e.db.CreateCollection(e.ctx, "off"); err != nil {
		t.Fatal(err)
	}
	enable := func(coll string, enabled bool) error {
		return e.db.RunCommand(e.ctx, csDoc("collMod", coll, "changeStreamPreAndPostImages", csDoc("enabled", enabled))).Err()
	}

	t.Run("options", func(t *testing.T) {
		specs, err := e.db.ListCollectionSpecifications(e.ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range specs {
			got[s.Name] = s.Options.String()
		}
		if got["on"] != `{"changeStreamPreAndPostImages": {"enabled": true}}` || got["off"] != `{}` {
			t.Errorf("listCollections options = %v", got)
		}
		err = e.db.CreateCollection(e.ctx, "off", options.CreateCollection().SetChangeStreamPreAndPostImages(csDoc("enabled", true)))
		if code := serverCode(err); code != 48 {
			t.Errorf("create of an existing collection with other options: %v, want NamespaceExists (48)", err)
		}
		if code := serverCode(enable("missing", true)); code != 26 {
			t.Errorf("collMod of a missing collection: code %d, want NamespaceNotFound (26)", code)
		}
	})

	for _, tt := range []struct {
		name, full, before string
		coll               *mongo.Collection
		wantErr            bool
	}{
		{"enabled whenAvailable", "whenAvailable", "whenAvailable", on, false},
		{"enabled required", "required", "required", on, false},
		{"disabled whenAvailable", "whenAvailable", "whenAvailable", off, false},
		{"disabled post-image required", "required", "off", off, true},
		{"disabled pre-image required", "default", "required", off, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.name
			if _, err := tt.coll.InsertOne(e.ctx, csDoc("_id", id, "n", 1)); err != nil {
				t.Fatal(err)
			}
			opts := options.ChangeStream().SetFullDocumentBeforeChange(options.FullDocument(tt.before))
			if tt.full != "default" {
				opts.SetFullDocument(options.FullDocument(tt.full))
			}
			cs := watch(t, e, tt.coll, mongo.Pipeline{csDoc("$match", csDoc("documentKey._id", id))}, opts)
			if _, err := tt.coll.UpdateOne(e.ctx, csDoc("_id", id), csDoc("$set", csDoc("n", 2))); err != nil {
				t.Fatal(err)
			}
			if _, err := tt.coll.ReplaceOne(e.ctx, csDoc("_id", id), csDoc("n", 3)); err != nil {
				t.Fatal(err)
			}
			if _, err := tt.coll.DeleteOne(e.ctx, csDoc("_id", id)); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr {
				if cs.Next(e.ctx) {
					t.Fatalf("event %v, want the stream to fail", cs.Current)
				}
				if code := serverCode(cs.Err()); code != 47 {
					t.Fatalf("stream error %v, want NoMatchingDocument (47)", cs.Err())
				}
				return
			}
			images := tt.coll == on
			pre := func(n int) any {
				if !images {
					return nil
				}
				return csDoc("_id", id, "n", int32(n))
			}
			upd, rep, del := nextRaw(t, e, cs), nextRaw(t, e, cs), nextRaw(t, e, cs)
			var post any
			if images {
				post = csDoc("_id", id, "n", int32(2))
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"update fullDocument", get(upd, "fullDocument"), post},
				{"update fullDocumentBeforeChange", get(upd, "fullDocumentBeforeChange"), pre(1)},
				{"replace fullDocumentBeforeChange", get(rep, "fullDocumentBeforeChange"), pre(2)},
				{"delete fullDocumentBeforeChange", get(del, "fullDocumentBeforeChange"), pre(3)},
			} {
				if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}

	t.Run("images follow the option at the time of the write", func(t *testing.T) {
		if _, err := off.InsertOne(e.ctx, csDoc("_id", "late", "n", 1)); err != nil {
			t.Fatal(err)
		}
		cs := watch(t, e, off, mongo.Pipeline{csDoc("$match", csDoc("operationType", "update"))},
			options.ChangeStream().SetFullDocument(options.WhenAvailable))
		if _, err := off.UpdateOne(e.ctx, csDoc("_id", "late"), csDoc("$set", csDoc("n", 2))); err != nil {
			t.Fatal(err)
		}
		if err := enable("off", true); err != nil {
			t.Fatal(err)
		}
		if _, err := off.UpdateOne(e.ctx, csDoc("_id", "late"), csDoc("$set", csDoc("n", 3))); err != nil {
			t.Fatal(err)
		}
		if err := enable("off", false); err != nil {
			t.Fatal(err)
		}
		first, second := nextRaw(t, e, cs), nextRaw(t, e, cs)
		if get(first, "fullDocument") != nil || get(second, "fullDocument.n") != int32(3) {
			t.Errorf("post-images = %v, %v; want none, then n 3", get(first, "fullDocument"), get(second, "fullDocument"))
		}
	})
}
