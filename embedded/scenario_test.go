package embedded_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// scenarioFile is testdata/scenarios.json: query-operator and update-operator cases in
// relaxed extended JSON, run through the driver by TestScenarios.
type scenarioFile struct {
	Sets    map[string][]bson.D `bson:"sets"`
	Finds   []findScenario      `bson:"finds"`
	Updates []updateScenario    `bson:"updates"`
}

// findScenario runs Filter against the named data set and expects exactly the _ids IDs, or
// the error code Error.
type findScenario struct {
	Name   string  `bson:"name"`
	Set    string  `bson:"set"`
	Filter bson.D  `bson:"filter"`
	Let    bson.D  `bson:"let"`
	IDs    []int32 `bson:"ids"`
	Error  int32   `bson:"error"`
}

// updateScenario loads Docs, runs one update statement (U is an update document or a
// pipeline; ArrayFilters and the command's Let are optional) and expects the reply counters
// (or the write error code Error) and then exactly the documents After (by _id).
type updateScenario struct {
	Name         string   `bson:"name"`
	Docs         []bson.D `bson:"docs"`
	Q            bson.D   `bson:"q"`
	U            any      `bson:"u"`
	ArrayFilters bson.A   `bson:"arrayFilters"`
	Let          bson.D   `bson:"let"`
	Upsert       bool     `bson:"upsert"`
	Multi        bool     `bson:"multi"`
	N            int32    `bson:"n"`
	NModified    int32    `bson:"nModified"`
	Upserted     any      `bson:"upserted"`
	Error        int32    `bson:"error"`
	After        []bson.D `bson:"after"`
}

func loadScenarios(t *testing.T) scenarioFile {
	t.Helper()
	data, err := os.ReadFile("testdata/scenarios.json")
	if err != nil {
		t.Fatalf("read scenarios: %v", err)
	}
	var f scenarioFile
	if err := bson.UnmarshalExtJSON(data, false, &f); err != nil {
		t.Fatalf("parse scenarios: %v", err)
	}
	if len(f.Finds) == 0 || len(f.Updates) == 0 {
		t.Fatalf("scenario file has %d finds and %d updates", len(f.Finds), len(f.Updates))
	}
	return f
}

func allDocs(e env, coll *mongo.Collection) ([]bson.D, error) {
	cur, err := coll.Find(e.ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []bson.D
	err = cur.All(e.ctx, &docs)
	return docs, err
}

func TestScenarios(t *testing.T) {
	f := loadScenarios(t)
	e := newEnv(t)

	for name, docs := range f.Sets {
		ins := make([]any, len(docs))
		for i, d := range docs {
			ins[i] = d
		}
		if _, err := e.db.Collection("set_"+name).InsertMany(e.ctx, ins); err != nil {
			t.Fatalf("load set %s: %v", name, err)
		}
	}
	t.Run("find", func(t *testing.T) {
		for _, sc := range f.Finds {
			t.Run(sc.Name, func(t *testing.T) {
				coll := e.db.Collection("set_" + sc.Set)
				opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})
				if sc.Let != nil {
					opts.SetLet(sc.Let)
				}
				cur, err := coll.Find(e.ctx, sc.Filter, opts)
				if sc.Error != 0 {
					if errCode(err) != sc.Error {
						t.Fatalf("find %v: %v, want error code %d", sc.Filter, err, sc.Error)
					}
					return
				}
				if err != nil {
					t.Fatalf("find %v: %v", sc.Filter, err)
				}
				var got []struct {
					ID int32 `bson:"_id"`
				}
				if err := cur.All(e.ctx, &got); err != nil {
					t.Fatalf("all: %v", err)
				}
				var ids []int32
				for _, g := range got {
					ids = append(ids, g.ID)
				}
				if !slices.Equal(ids, sc.IDs) {
					t.Errorf("find %v = %v, want %v", sc.Filter, ids, sc.IDs)
				}
				// The same filter through CountDocuments must agree (count has no let).
				if sc.Let != nil {
					return
				}
				if n, err := coll.CountDocuments(e.ctx, sc.Filter); err != nil || n != int64(len(sc.IDs)) {
					t.Errorf("count %v = %d, %v; want %d", sc.Filter, n, err, len(sc.IDs))
				}
			})
		}
	})

	t.Run("update", func(t *testing.T) {
		for i, sc := range f.Updates {
			t.Run(sc.Name, func(t *testing.T) {
				coll := e.db.Collection(fmt.Sprintf("upd_%d", i))
				if err := e.db.CreateCollection(e.ctx, coll.Name()); err != nil {
					t.Fatalf("create: %v", err)
				}
				for _, d := range sc.Docs {
					if _, err := coll.InsertOne(e.ctx, d); err != nil {
						t.Fatalf("load: %v", err)
					}
				}
				stmt := bson.D{{Key: "q", Value: sc.Q}, {Key: "u", Value: sc.U}, {Key: "upsert", Value: sc.Upsert}, {Key: "multi", Value: sc.Multi}}
				if sc.ArrayFilters != nil {
					stmt = append(stmt, bson.E{Key: "arrayFilters", Value: sc.ArrayFilters})
				}
				cmd := bson.D{{Key: "update", Value: coll.Name()}, {Key: "updates", Value: bson.A{stmt}}}
				if sc.Let != nil {
					cmd = append(cmd, bson.E{Key: "let", Value: sc.Let})
				}
				raw, err := runRaw(e.ctx, e.db, cmd)
				if sc.Error != 0 {
					var we mongo.WriteException
					if !errors.As(err, &we) || len(we.WriteErrors) != 1 || int32(we.WriteErrors[0].Code) != sc.Error || we.WriteErrors[0].Index != 0 {
						t.Fatalf("update: %v, want one write error with code %d at index 0", err, sc.Error)
					}
				} else {
					if err != nil {
						t.Fatalf("update: %v", err)
					}
					d := mustD(t, raw)
					if get(d, "n") != sc.N || get(d, "nModified") != sc.NModified {
						t.Errorf("n = %v nModified = %v, want %d and %d", get(d, "n"), get(d, "nModified"), sc.N, sc.NModified)
					}
					ups, _ := get(d, "upserted").(bson.A)
					switch {
					case sc.Upserted == nil && len(ups) != 0:
						t.Errorf("upserted = %v, want none", ups)
					case sc.Upserted != nil && (len(ups) != 1 || typed(get(ups[0].(bson.D), "_id")) != typed(sc.Upserted)):
						t.Errorf("upserted = %v, want _id %v", ups, sc.Upserted)
					}
				}
				docs, err := allDocs(e, coll)
				if err != nil {
					t.Fatalf("read back: %v", err)
				}
				if typed(toA(docs)) != typed(toA(sc.After)) {
					t.Errorf("documents after\n got %s\nwant %s", typed(toA(docs)), typed(toA(sc.After)))
				}
			})
		}
	})
}

func toA(docs []bson.D) bson.A {
	a := bson.A{}
	for _, d := range docs {
		a = append(a, d)
	}
	return a
}
