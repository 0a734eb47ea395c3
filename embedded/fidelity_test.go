package embedded_test

import (
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/wire"
)

// fidelityCase is one behaviour where the server once answered ok where MongoDB answers
// otherwise (issue #27). check runs it and reports what is wrong, "" when it behaves.
type fidelityCase struct {
	name string
	// embeddedOnly marks a refusal (238) of what MongoDB does: skipped against a real server.
	embeddedOnly bool
	check        func(t *testing.T, e env) string
}

// wantCode runs cmd and reports unless it fails with code (and, when given, a message holding want).
func wantCode(e env, cmd bson.D, code int32, want string) string {
	err := e.db.RunCommand(e.ctx, cmd).Err()
	if errCode(err) != code {
		return fmt.Sprintf("err = %v, want code %d", err, code)
	}
	if want != "" && !strings.Contains(errMessage(err), want) {
		return fmt.Sprintf("message %q does not name %q", errMessage(err), want)
	}
	return ""
}

// snapshotRC is readConcern {level: "snapshot"}.
var snapshotRC = bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}}

func fidelityCases() []fidelityCase {
	var cases []fidelityCase
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, snapshotRC},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, snapshotRC},
		{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"}, snapshotRC},
	} {
		cases = append(cases, fidelityCase{name: "snapshot " + cmd[0].Key + " refused", embeddedOnly: true,
			check: func(_ *testing.T, e env) string { return wantCode(e, cmd, 238, "snapshot") }})
	}
	for _, cmd := range []bson.D{
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 9}}}}, snapshotRC},
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: 1}}}}}}}}, snapshotRC},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 1}}}}, snapshotRC},
		{{Key: "findAndModify", Value: "c"}, {Key: "query", Value: bson.D{}}, {Key: "remove", Value: true}, snapshotRC},
		{{Key: "listCollections", Value: 1}, snapshotRC},
		{{Key: "listIndexes", Value: "c"}, snapshotRC},
	} {
		cases = append(cases, fidelityCase{name: "snapshot " + cmd[0].Key + " InvalidOptions",
			check: func(_ *testing.T, e env) string { return wantCode(e, cmd, 72, "") }})
	}
	cases = append(cases,
		fidelityCase{name: "snapshot listDatabases InvalidOptions", check: func(_ *testing.T, e env) string {
			err := e.c.Database("admin").RunCommand(e.ctx, bson.D{{Key: "listDatabases", Value: 1}, snapshotRC}).Err()
			if errCode(err) != 72 {
				return "err = " + fmt.Sprint(err) + ", want 72"
			}
			return ""
		}},
		fidelityCase{name: "apiStrict distinct", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "a"},
				{Key: "apiVersion", Value: "1"}, {Key: "apiStrict", Value: true}}, 323, "distinct")
		}},
		fidelityCase{name: "update pipeline unknown operator fails the command", check: func(t *testing.T, e env) string {
			raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
				bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$noSuchOperator", Value: 1}}}}}}}}},
			}}})
			if raw == nil {
				return fmt.Sprintf("no reply: %v", err)
			}
			if ok, _ := asInt64(get(mustD(t, raw), "ok")); ok != 0 {
				return fmt.Sprintf("reply %v is ok:1, want ok:0", raw)
			}
			if errCode(err) != 168 {
				return fmt.Sprintf("err = %v, want 168 InvalidPipelineOperator", err)
			}
			return ""
		}},
		fidelityCase{name: "upsert with _id null reports upserted", check: func(_ *testing.T, e env) string {
			raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "update", Value: "u"}, {Key: "updates", Value: bson.A{
				bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: nil}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "upsert", Value: true}},
			}}})
			if err != nil {
				return fmt.Sprint(err)
			}
			up, ok := raw.Lookup("upserted").ArrayOK()
			if !ok {
				return "reply " + raw.String() + " has no upserted"
			}
			vals, _ := up.Values()
			if len(vals) != 1 || vals[0].Document().Lookup("_id").Type != bson.TypeNull {
				return "upserted = " + up.String() + ", want [{index: 0, _id: null}]"
			}
			return ""
		}},
	)
	for _, stage := range []bson.D{
		{{Key: "$out", Value: "outc"}},
		{{Key: "$merge", Value: bson.D{{Key: "into", Value: "mergec"}}}},
	} {
		cases = append(cases, fidelityCase{name: stage[0].Key + " unsatisfiable write concern", check: func(_ *testing.T, e env) string {
			raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{stage}},
				{Key: "cursor", Value: bson.D{}}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 5}}}})
			if raw == nil {
				return "no reply: " + fmt.Sprint(err)
			}
			if _, ok := raw.Lookup("writeConcernError").DocumentOK(); !ok {
				return "reply " + raw.String() + " has no writeConcernError"
			}
			return ""
		}})
	}
	for _, cmd := range []bson.D{
		{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 0}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{{Key: "batchSize", Value: 0}}}},
	} {
		cases = append(cases, fidelityCase{name: cmd[0].Key + " batchSize 0", check: func(t *testing.T, e env) string {
			raw, err := runRaw(e.ctx, e.db, cmd)
			if err != nil {
				return fmt.Sprint(err)
			}
			batch, _ := raw.Lookup("cursor", "firstBatch").Array().Values()
			id := raw.Lookup("cursor", "id").Int64()
			if len(batch) != 0 || id == 0 {
				return "first batch " + raw.Lookup("cursor").String() + ", want empty with an open cursor"
			}
			more, err := runRaw(e.ctx, e.db, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
			if err != nil {
				return "getMore: " + fmt.Sprint(err)
			}
			if next, _ := more.Lookup("cursor", "nextBatch").Array().Values(); len(next) != 3 {
				return "getMore returned " + more.String() + ", want the 3 documents"
			}
			return ""
		}})
	}
	cases = append(cases,
		fidelityCase{name: "exhaust getMore refused", embeddedOnly: true, check: func(t *testing.T, e env) string {
			raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}})
			if err != nil {
				return fmt.Sprint(err)
			}
			id := raw.Lookup("cursor", "id").Int64()
			rc := dialRaw(t, e.store.Server.Addr())
			body, _ := bson.Marshal(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "$db", Value: e.db.Name()}})
			h, reply := rc.roundTrip(t, wire.AppendMsg(nil, 7, 0, wire.FlagExhaustAllowed, body), 7)
			m, perr := wire.ParseMsg(reply)
			if perr != nil || h.OpCode != wire.OpMsg {
				return "bad reply"
			}
			if m.Flags&wire.FlagMoreToCome != 0 {
				return ""
			}
			d := mustD(t, m.Body)
			if c, _ := asInt64(get(d, "code")); c != 238 {
				return "exhaust getMore answered " + bson.Raw(m.Body).String() + ", want 238 (or a stream)"
			}
			return ""
		}},
		fidelityCase{name: "hint honoured", check: func(_ *testing.T, e env) string {
			cur, err := e.db.Collection("c").Find(e.ctx, bson.D{}, options.Find().SetHint("a_1"))
			if err != nil {
				return fmt.Sprint(err)
			}
			var docs []bson.D
			if err := cur.All(e.ctx, &docs); err != nil {
				return fmt.Sprint(err)
			}
			if len(docs) != 3 {
				return fmt.Sprintf("%d documents, want 3", len(docs))
			}
			first, _ := asInt64(get(docs[0], "_id"))
			if last, _ := asInt64(get(docs[2], "_id")); first != 3 || last != 1 {
				return "documents with hint a_1 not in a order"
			}
			return ""
		}},
		fidelityCase{name: "hint missing index refused in find", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: "nope_1"}}, 2, "hint provided does not correspond to an existing index")
		}},
		fidelityCase{name: "hint missing key pattern refused in count", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "count", Value: "c"}, {Key: "hint", Value: bson.D{{Key: "b", Value: 1}}}}, 2, "hint provided")
		}},
		fidelityCase{name: "hint missing index refused in aggregate", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}, {Key: "hint", Value: "nope"}}, 2, "hint provided")
		}},
		fidelityCase{name: "sort not a document", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: "a"}}, 14, "sort")
		}},
		fidelityCase{name: "projection not a document", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "find", Value: "c"}, {Key: "projection", Value: int32(1)}}, 14, "projection")
		}},
		fidelityCase{name: "$natural sort refused", embeddedOnly: true, check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "$natural", Value: 1}}}}, 238, "$natural")
		}},
		fidelityCase{name: "listDatabases lists admin", check: func(_ *testing.T, e env) string {
			res, err := e.c.ListDatabaseNames(e.ctx, bson.D{})
			if err != nil {
				return fmt.Sprint(err)
			}
			for _, n := range res {
				if n == "admin" {
					return ""
				}
			}
			return "databases " + strings.Join(res, ",") + " lack admin"
		}},
		fidelityCase{name: "listIndexes keeps background", check: func(_ *testing.T, e env) string {
			cur, err := e.db.Collection("c").Indexes().List(e.ctx)
			if err != nil {
				return fmt.Sprint(err)
			}
			var all []bson.D
			if err := cur.All(e.ctx, &all); err != nil {
				return fmt.Sprint(err)
			}
			for _, d := range all {
				if get(d, "name") == "bg_1" && get(d, "background") == true {
					return ""
				}
			}
			return fmt.Sprintf("listIndexes lost background: %v", all)
		}},
		fidelityCase{name: "change stream readConcern local refused", check: func(_ *testing.T, e env) string {
			return wantCode(e, bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$changeStream", Value: bson.D{}}}}},
				{Key: "cursor", Value: bson.D{}}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}}}}, 72, "majority")
		}},
	)
	return cases
}

// TestNoSilentWrongAnswers checks each behaviour issue #27 found answered ok where MongoDB
// answers otherwise: each case fails on the server before the fix.
func TestNoSilentWrongAnswers(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 3}},
		bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "a", Value: 1}},
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, err := coll.Indexes().CreateMany(e.ctx, []mongo.IndexModel{{Keys: bson.D{{Key: "a", Value: 1}}}}); err != nil {
		t.Fatalf("index: %v", err)
	}
	if err := e.db.RunCommand(e.ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "bg", Value: 1}}}, {Key: "name", Value: "bg_1"}, {Key: "background", Value: true}},
	}}}).Err(); err != nil {
		t.Fatalf("index: %v", err)
	}
	for _, tc := range fidelityCases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.embeddedOnly {
				e.store.SkipIfReal(t)
			}
			if msg := tc.check(t, e); msg != "" {
				t.Error(msg)
			}
		})
	}
	// Nothing the refused commands carried was applied.
	if n, err := coll.CountDocuments(e.ctx, bson.D{{Key: "_id", Value: 9}}); err != nil || n != 0 {
		t.Errorf("refused snapshot insert left %d documents (%v)", n, err)
	}
}

// TestFailPointFidelity checks the fail points behave as mongod's (issue #27): each case fails
// on the server before the fix.
func TestFailPointFidelity(t *testing.T) {
	t.Run("injected ShutdownInProgress has no topologyVersion", func(t *testing.T) {
		e := newEnv(t)
		e.store.FailPoint(t, e.c, failCommand(bson.D{{Key: "times", Value: 1}},
			bson.D{{Key: "failCommands", Value: bson.A{"ping"}}, {Key: "errorCode", Value: int32(91)}}))
		raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "ping", Value: 1}})
		if errCode(err) != 91 {
			t.Fatalf("ping: %v, want 91", err)
		}
		if _, has := raw.Lookup("topologyVersion").DocumentOK(); has {
			t.Errorf("reply %v carries a topologyVersion; mongod adds one only while shutting down", raw)
		}
	})
	t.Run("appName fires on the handshake hello", func(t *testing.T) {
		e := newEnv(t)
		e.store.SkipIfReal(t) // dials the embedded server's address
		e.store.FailPoint(t, e.c, failCommand(bson.D{{Key: "times", Value: 1}},
			bson.D{{Key: "failCommands", Value: bson.A{"hello", "isMaster"}}, {Key: "appName", Value: "fp-hs"}, {Key: "errorCode", Value: int32(18)}}))
		rc := dialRaw(t, e.store.Server.Addr())
		reply := rc.command(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"},
			{Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "fp-hs"}}}}}})
		if c, _ := asInt64(get(reply, "code")); c != 18 {
			t.Errorf("handshake hello of app fp-hs answered %v, want the fail point's code 18", reply)
		}
	})
	t.Run("onPrimaryTransactionalWrite does not fire again on the retry of a batch", func(t *testing.T) {
		e := newEnv(t)
		// Every write unit loses its reply. mongod inserts an insertMany's documents in one
		// write unit: the first attempt applies all three, the retry replays them.
		e.store.FailPoint(t, e.c, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
			{Key: "mode", Value: "alwaysOn"}})
		coll := e.db.Collection("c")
		docs := []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "_id", Value: 3}}}
		// A context without a deadline: the driver then retries exactly once (with one, it
		// retries until the deadline, which would hide a second firing).
		if _, err := coll.InsertMany(t.Context(), docs); err != nil {
			t.Fatalf("insertMany with one retry: %v", err)
		}
		if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 3 {
			t.Errorf("count = %d (%v), want 3", n, err)
		}
	})
}
