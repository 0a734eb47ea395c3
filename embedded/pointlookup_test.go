package embedded_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestConcurrentGuardedUpsertsMatchSerialModel cross-checks concurrent guarded upserts (the
// shape of rollup's leaf writes: the unique key, version < v, $set, upsert), whose finds are
// planned and whose documents and index keys are prepared outside the engine's lock, against
// a naive serial model replayed in oplog order. Writers send unordered batches with repeated
// keys and stale versions (so statements of one command invalidate each other's planned
// lookups) while another client creates and drops a unique and a plain secondary index (so
// plans and prepared keys go stale between the plan and the write). Checked:
//   - the change stream's events come in strictly increasing cluster time (commit order);
//   - replayed in that order, an insert never meets a stored key (unique index) and an update
//     always meets a stored version < its own (the guard held when it committed);
//   - every statement's reported outcome appears exactly once: an upsert as one insert event
//     with the reported _id, a modification as one update event, a duplicate key error as
//     none (and the key then holds a version >= its own);
//   - the collection ends equal to the model, and the unique secondary index, re-created
//     while writers still run, finds every document written after it.
func TestConcurrentGuardedUpsertsMatchSerialModel(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("leaves")
	createKeyIndex(t, e, coll)
	cs, err := coll.Watch(e.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer cs.Close(e.ctx)

	const (
		writers   = 8
		batches   = 12
		batchSize = 150 // > largeWrite: these take write turns
		keyIDs    = 40  // x 2 types = 80 keys: repeats within a batch
	)
	type kk struct{ id, typ string }
	type stmt struct {
		k        kk
		version  int64
		sid      string
		upserted any  // the reported _id
		dupKey   bool // failed with E11000
	}
	stmts := make([][]stmt, writers)
	errs := make(chan error, writers+1)
	stopChurn := make(chan struct{})
	var churnDone sync.WaitGroup
	churnDone.Go(func() {
		idx := coll.Indexes()
		for i := 0; ; i++ {
			select {
			case <-stopChurn:
				return
			default:
			}
			models := []mongo.IndexModel{
				{Keys: bson.D{{Key: "sid", Value: 1}}, Options: options.Index().SetUnique(true).SetName("sid_1")},
				{Keys: bson.D{{Key: "w", Value: 1}}, Options: options.Index().SetName("w_1")},
			}
			if _, err := idx.CreateMany(e.ctx, models); err != nil {
				errs <- fmt.Errorf("create indexes: %w", err)
				return
			}
			if i%2 == 0 {
				if err := idx.DropOne(e.ctx, "sid_1"); err != nil {
					errs <- fmt.Errorf("drop index: %w", err)
					return
				}
			}
			if err := idx.DropOne(e.ctx, "w_1"); err != nil {
				errs <- fmt.Errorf("drop index: %w", err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	var half sync.WaitGroup // every writer is half-way
	half.Add(writers)
	for w := range writers {
		c := e.c
		if w%2 == 1 {
			c = e.store.Client(t, quickMonitor())
		}
		wcoll := c.Database(e.db.Name()).Collection("leaves")
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 25))
			for b := range batches {
				if b == batches/2 {
					half.Done()
				}
				models := make([]mongo.WriteModel, 0, batchSize)
				batch := make([]stmt, 0, batchSize)
				for i := range batchSize {
					s := stmt{
						k:       kk{id: fmt.Sprintf("k%d", rng.IntN(keyIDs)), typ: []string{"p", "q"}[rng.IntN(2)]},
						version: int64(rng.IntN(50)),
						sid:     fmt.Sprintf("w%d-b%d-s%d", w, b, i),
					}
					batch = append(batch, s)
					models = append(models, mongo.NewUpdateOneModel().
						SetFilter(bson.D{{Key: "id", Value: s.k.id}, {Key: "type", Value: s.k.typ}, {Key: "timestamp", Value: int32(7)},
							{Key: "version", Value: bson.D{{Key: "$lt", Value: s.version}}}}).
						SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: s.version}, {Key: "sid", Value: s.sid}, {Key: "w", Value: int32(w)}}}}).
						SetUpsert(true))
				}
				res, err := wcoll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false))
				var bwe mongo.BulkWriteException
				switch {
				case errors.As(err, &bwe):
					if bwe.WriteConcernError != nil {
						errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
						return
					}
					for _, we := range bwe.WriteErrors {
						if we.Code != 11000 {
							errs <- fmt.Errorf("writer %d batch %d: statement %d: %w", w, b, we.Index, we)
							return
						}
						batch[we.Index].dupKey = true
					}
				case err != nil:
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
				if res != nil {
					for i, id := range res.UpsertedIDs {
						batch[i].upserted = id
					}
				}
				stmts[w] = append(stmts[w], batch...)
			}
		})
	}
	half.Wait()
	close(stopChurn)
	churnDone.Wait()
	// The churn ends with sid_1 and w_1 created, or sid_1 alone: make sure sid_1 is there for
	// the last check, created before the writers' second halves end.
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "sid", Value: 1}},
		Options: options.Index().SetUnique(true).SetName("sid_1")}); err != nil {
		t.Fatalf("create sid_1: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The statements by sid; the events they must produce.
	bySid := map[string]*stmt{}
	wantEvents := 0
	for w := range stmts {
		for i := range stmts[w] {
			s := &stmts[w][i]
			bySid[s.sid] = s
			if !s.dupKey {
				wantEvents++ // an insert (upserted) or an update (matched: a new version always modifies)
			}
		}
	}
	type stored struct {
		version int64
		sid     string
	}
	model := map[kk]stored{}
	keyOfID := map[string]kk{} // _id (as formatted) -> key
	seenSid := map[string]bool{}
	var lastTS bson.Timestamp
	for n := 0; n < wantEvents; n++ {
		if !cs.Next(e.ctx) {
			t.Fatalf("change stream ended after %d of %d events: %v", n, wantEvents, cs.Err())
		}
		var ev struct {
			Op          string         `bson:"operationType"`
			ClusterTime bson.Timestamp `bson:"clusterTime"`
			DocKey      bson.Raw       `bson:"documentKey"`
			Full        struct {
				ID      string `bson:"id"`
				Type    string `bson:"type"`
				Version int64  `bson:"version"`
				Sid     string `bson:"sid"`
			} `bson:"fullDocument"`
			Upd struct {
				Fields struct {
					Version int64  `bson:"version"`
					Sid     string `bson:"sid"`
				} `bson:"updatedFields"`
			} `bson:"updateDescription"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatalf("decode event %d: %v", n, err)
		}
		if n > 0 && !ev.ClusterTime.After(lastTS) {
			t.Fatalf("event %d: cluster time %v not after %v", n, ev.ClusterTime, lastTS)
		}
		lastTS = ev.ClusterTime
		id := ev.DocKey.Lookup("_id").String()
		switch ev.Op {
		case "insert":
			k := kk{ev.Full.ID, ev.Full.Type}
			if cur, ok := model[k]; ok {
				t.Fatalf("event %d: insert of key %v (sid %s) while it holds version %d (sid %s): unique index violated",
					n, k, ev.Full.Sid, cur.version, cur.sid)
			}
			s := bySid[ev.Full.Sid]
			if s == nil || s.upserted == nil || s.k != k || s.version != ev.Full.Version {
				t.Fatalf("event %d: insert by sid %s, which did not report that upsert (%+v)", n, ev.Full.Sid, s)
			}
			if got := bson.RawValue(ev.DocKey.Lookup("_id")); fmt.Sprint(got) != fmt.Sprint(mustRawValue(t, s.upserted)) {
				t.Fatalf("event %d: sid %s inserted _id %v, reported %v", n, s.sid, got, s.upserted)
			}
			model[k] = stored{ev.Full.Version, ev.Full.Sid}
			keyOfID[id] = k
			if seenSid[s.sid] {
				t.Fatalf("event %d: sid %s applied twice", n, s.sid)
			}
			seenSid[s.sid] = true
		case "update":
			k, ok := keyOfID[id]
			if !ok {
				t.Fatalf("event %d: update of unknown _id %s", n, id)
			}
			f := ev.Upd.Fields
			s := bySid[f.Sid]
			if s == nil || s.upserted != nil || s.dupKey || s.k != k || s.version != f.Version {
				t.Fatalf("event %d: update by sid %s, which did not report a modification (%+v)", n, f.Sid, s)
			}
			if cur := model[k]; cur.version >= f.Version {
				t.Fatalf("event %d: sid %s set version %d over %d: the guard did not hold at commit", n, f.Sid, f.Version, cur.version)
			}
			model[k] = stored{f.Version, f.Sid}
			if seenSid[s.sid] {
				t.Fatalf("event %d: sid %s applied twice", n, s.sid)
			}
			seenSid[s.sid] = true
		default:
			t.Fatalf("event %d: unexpected %s", n, ev.Op)
		}
	}
	for sid, s := range bySid {
		switch {
		case s.dupKey && seenSid[sid]:
			t.Errorf("sid %s failed with E11000 and was applied", sid)
		case s.dupKey && model[s.k].version < s.version:
			t.Errorf("sid %s failed with E11000 but its key holds the older version %d < %d", sid, model[s.k].version, s.version)
		case !s.dupKey && !seenSid[sid]:
			t.Errorf("sid %s reported success but no event applied it", sid)
		}
	}

	cur, err := coll.Find(e.ctx, bson.D{})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var docs []struct {
		ID      string `bson:"id"`
		Type    string `bson:"type"`
		Version int64  `bson:"version"`
		Sid     string `bson:"sid"`
	}
	if err := cur.All(e.ctx, &docs); err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(docs) != len(model) {
		t.Errorf("%d documents stored, the model has %d", len(docs), len(model))
	}
	for _, d := range docs {
		if want := model[kk{d.ID, d.Type}]; want.version != d.Version || want.sid != d.Sid {
			t.Errorf("key %s/%s: stored version %d sid %s, model %d %s", d.ID, d.Type, d.Version, d.Sid, want.version, want.sid)
		}
		var got bson.M
		err := coll.FindOne(e.ctx, bson.D{{Key: "sid", Value: d.Sid}}, options.FindOne().SetHint("sid_1")).Decode(&got)
		if err != nil {
			t.Errorf("sid %s: not found through sid_1: %v", d.Sid, err)
		}
	}
}

func mustRawValue(t *testing.T, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	return bson.RawValue{Type: typ, Value: data}
}
