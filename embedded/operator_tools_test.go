package embedded_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestServerStatus sends serverStatus as mongostat and the Prometheus MongoDB exporter do
// ({serverStatus: 1, recordStats: 0} on admin) and checks the sections the server computes.
func TestServerStatus(t *testing.T) {
	e := newEnv(t)
	admin := e.c.Database("admin")
	status := func(extra ...bson.E) bson.D {
		t.Helper()
		raw, err := runRaw(e.ctx, admin, append(bson.D{{Key: "serverStatus", Value: 1}, {Key: "recordStats", Value: 0}}, extra...))
		if err != nil {
			t.Fatalf("serverStatus: %v", err)
		}
		return mustD(t, raw)
	}
	counter := func(d bson.D, path string) int64 {
		t.Helper()
		n, ok := asInt64(get(d, path))
		if !ok {
			t.Fatalf("serverStatus %s = %v, want a number", path, get(d, path))
		}
		return n
	}
	before := status()
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "_id", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.DeleteOne(e.ctx, bson.D{{Key: "_id", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(e.ctx, bson.D{}).Err(); err != nil {
		t.Fatal(err)
	}
	after := status()
	for path, want := range map[string]int64{"opcounters.insert": 2, "opcounters.update": 1, "opcounters.delete": 1, "opcounters.query": 1} {
		if got := counter(after, path) - counter(before, path); got < want {
			t.Errorf("%s grew by %d, want at least %d", path, got, want)
		}
	}
	if counter(after, "opcounters.command") <= counter(before, "opcounters.command") {
		t.Error("opcounters.command did not count the serverStatus command")
	}
	cur, total := counter(after, "connections.current"), counter(after, "connections.totalCreated")
	if cur < 1 || total < cur || counter(after, "connections.available") < 1 {
		t.Errorf("connections = %v", get(after, "connections"))
	}
	if u, ok := get(after, "uptime").(float64); !ok || u <= 0 {
		t.Errorf("uptime = %v", get(after, "uptime"))
	}
	if get(after, "process") != "mongod" || get(after, "repl.setName") == nil {
		t.Errorf("process %v, repl %v", get(after, "process"), get(after, "repl"))
	}
	if mem := get(after, "mem"); mem != nil && counter(after, "mem.resident") <= 0 {
		t.Errorf("mem = %v, want a resident size", mem)
	}
	if !e.store.Real() {
		if w := counter(after, "repl.oplog.windowSecs"); w < 0 {
			t.Errorf("oplog window %d s", w)
		}
	}
	if d := status(bson.E{Key: "repl", Value: 0}); get(d, "repl") != nil {
		t.Error("serverStatus with repl: 0 still has repl")
	}
}

// TestHostInfo sends hostInfo as mongosh's db.hostInfo() and rollup's serve do (on admin) and
// checks the cores it reports: serve sizes its writes in flight by
// numCoresAvailableToProcess. On another database it is refused, as by mongod.
func TestHostInfo(t *testing.T) {
	e := newEnv(t)
	raw, err := runRaw(e.ctx, e.c.Database("admin"), bson.D{{Key: "hostInfo", Value: 1}})
	if err != nil {
		t.Fatalf("hostInfo: %v", err)
	}
	d := mustD(t, raw)
	avail, ok := asInt64(get(d, "system.numCoresAvailableToProcess"))
	if !ok || avail < 1 {
		t.Fatalf("system.numCoresAvailableToProcess = %v, want a count of cores", get(d, "system.numCoresAvailableToProcess"))
	}
	if all, ok := asInt64(get(d, "system.numCores")); ok && all < avail {
		t.Errorf("numCores %d < numCoresAvailableToProcess %d", all, avail)
	}
	if want := min(runtime.NumCPU(), runtime.GOMAXPROCS(0)); !e.store.Real() && avail != int64(want) {
		t.Errorf("numCoresAvailableToProcess = %d, want the process's CPUs (affinity, at most GOMAXPROCS) %d", avail, want)
	}
	if h, _ := get(d, "system.hostname").(string); h == "" {
		t.Errorf("system.hostname = %v", get(d, "system.hostname"))
	}
	_, err = runRaw(e.ctx, e.db, bson.D{{Key: "hostInfo", Value: 1}})
	if code := errCode(err); code != 13 {
		t.Errorf("hostInfo on %s: %v (code %d), want 13 Unauthorized", e.db.Name(), err, code)
	}
}

// TestOperatorCommands runs the other commands monitoring tools send first.
func TestOperatorCommands(t *testing.T) {
	e := newEnv(t)
	admin := e.c.Database("admin")
	t.Run("getCmdLineOpts", func(t *testing.T) {
		raw, err := runRaw(e.ctx, admin, bson.D{{Key: "getCmdLineOpts", Value: 1}})
		if err != nil {
			t.Fatal(err)
		}
		d := mustD(t, raw)
		if _, ok := get(d, "argv").(bson.A); !ok {
			t.Errorf("argv = %v", get(d, "argv"))
		}
		if e.store.Real() {
			return
		}
		_, port, _ := strings.Cut(e.store.Server.Addr(), ":")
		if p, _ := asInt64(get(d, "parsed.net.port")); strconv.FormatInt(p, 10) != port {
			t.Errorf("parsed.net.port = %v, want %s", get(d, "parsed.net.port"), port)
		}
		if get(d, "parsed.replication.replSetName") == nil {
			t.Errorf("parsed = %v", get(d, "parsed"))
		}
	})
	t.Run("replSetGetStatus", func(t *testing.T) {
		raw, err := runRaw(e.ctx, admin, bson.D{{Key: "replSetGetStatus", Value: 1}})
		if err != nil {
			t.Fatal(err)
		}
		members, _ := get(mustD(t, raw), "members").(bson.A)
		if len(members) == 0 {
			t.Fatalf("no members: %v", raw)
		}
		var primary bool
		for _, m := range members {
			if d, _ := m.(bson.D); get(d, "stateStr") == "PRIMARY" {
				primary = true
			}
		}
		if !primary {
			t.Errorf("no PRIMARY member: %v", members)
		}
	})
	t.Run("what the server does not serve is refused", func(t *testing.T) {
		e.store.SkipIfReal(t)
		for _, cmd := range []string{"getDiagnosticData", "top", "dbStats", "collStats", "replSetGetConfig"} {
			if err := admin.RunCommand(e.ctx, bson.D{{Key: cmd, Value: 1}}).Err(); errCode(err) != 238 || !strings.Contains(errMessage(err), cmd) {
				t.Errorf("%s: %v, want 238 naming it", cmd, err)
			}
		}
	})
}

// TestExplain checks explain names the index a query scans, or COLLSCAN.
func TestExplain(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t) // mongod 7.0's SBE plans nest winningPlan differently
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	explain := func(t *testing.T, inner bson.D, verbosity string) (bson.D, error) {
		raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "explain", Value: inner}, {Key: "verbosity", Value: verbosity}})
		if err != nil {
			return nil, err
		}
		return mustD(t, raw), nil
	}
	// scan finds the plan's leaf stage: IXSCAN (with its index) or COLLSCAN.
	var scan func(stage bson.D) (string, any)
	scan = func(stage bson.D) (string, any) {
		if in, ok := get(stage, "inputStage").(bson.D); ok {
			return scan(in)
		}
		s, _ := get(stage, "stage").(string)
		return s, get(stage, "indexName")
	}
	agg := func(pipeline ...bson.D) bson.D {
		p := bson.A{}
		for _, st := range pipeline {
			p = append(p, st)
		}
		return bson.D{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: p}, {Key: "cursor", Value: bson.D{}}}
	}
	match := bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 1}}}}
	group := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}}
	tests := []struct {
		name      string
		cmd       bson.D
		planPath  string
		wantStage string
		wantIndex any
	}{
		{"find on an indexed field", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "a", Value: 1}}}}, "queryPlanner.winningPlan", "IXSCAN", "a_1"},
		{"find by _id", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}}, "queryPlanner.winningPlan", "IXSCAN", "_id_"},
		{"find on an unindexed field", bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "b", Value: 1}}}}, "queryPlanner.winningPlan", "COLLSCAN", nil},
		{"find with a hint", bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: "a_1"}}, "queryPlanner.winningPlan", "IXSCAN", "a_1"},
		{"aggregate of a $match", agg(match), "queryPlanner.winningPlan", "IXSCAN", "a_1"},
		{"aggregate with $group", agg(match, group), "stages", "IXSCAN", "a_1"},
		{"aggregate without $match", agg(group), "stages", "COLLSCAN", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := explain(t, tc.cmd, "queryPlanner")
			if err != nil {
				t.Fatal(err)
			}
			plan, _ := get(d, tc.planPath).(bson.D)
			if tc.planPath == "stages" {
				stages, _ := get(d, "stages").(bson.A)
				if len(stages) < 2 {
					t.Fatalf("stages = %v", get(d, "stages"))
				}
				first, _ := stages[0].(bson.D)
				plan, _ = get(first, "$cursor.queryPlanner.winningPlan").(bson.D)
			}
			if stage, index := scan(plan); stage != tc.wantStage || index != tc.wantIndex {
				t.Errorf("plan %v: leaf %s %v, want %s %v", plan, stage, index, tc.wantStage, tc.wantIndex)
			}
		})
	}
	for _, verbosity := range []string{"executionStats", "allPlansExecution"} {
		if _, err := explain(t, tests[0].cmd, verbosity); errCode(err) != 238 {
			t.Errorf("verbosity %s: %v, want 238", verbosity, err)
		}
	}
	if _, err := explain(t, bson.D{{Key: "count", Value: "c"}}, "queryPlanner"); errCode(err) != 238 {
		t.Errorf("explain count: %v, want 238", err)
	}
	if _, err := explain(t, bson.D{{Key: "find", Value: "c"}, {Key: "hint", Value: "nope"}}, "queryPlanner"); errCode(err) != 2 {
		t.Errorf("explain with a missing hint: %v, want 2", err)
	}
}
