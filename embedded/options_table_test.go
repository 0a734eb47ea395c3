package embedded_test

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded"
)

var updateSpecDoc = flag.Bool("update-spec-doc", false, "rewrite the option table in docs/spec-tests.md")

// firstValue is a plausible value of a command's first field: a collection name, a cursor id,
// or 1.
func firstValue(name string) any {
	switch name {
	case "getMore":
		return int64(1)
	case "find", "insert", "update", "delete", "findAndModify", "findandmodify", "count", "distinct",
		"aggregate", "create", "collMod", "drop", "createIndexes", "listIndexes", "dropIndexes", "killCursors":
		return "c"
	case "renameCollection":
		return "x.c"
	case "configureFailPoint":
		return "failCommand"
	}
	return 1
}

// optionValues are values for the generic fields a command may carry (the driver adds $db,
// lsid, $clusterTime and txnNumber itself, on every command of every test).
var optionValues = map[string]any{
	"readConcern":          bson.D{{Key: "level", Value: "local"}},
	"writeConcern":         bson.D{{Key: "w", Value: 1}},
	"apiVersion":           "1",
	"apiStrict":            false,
	"apiDeprecationErrors": false,
	"comment":              "c",
	"maxTimeMS":            int32(10000),
	"$readPreference":      bson.D{{Key: "mode", Value: "primary"}},
	"$client":              bson.D{},
}

// refusedNaming reports whether err is a 238 refusal naming the option.
func refusedNaming(err error, option string) bool {
	return errCode(err) == 238 && strings.Contains(errMessage(err), "'"+option+"'")
}

// TestOptionTable walks the option table for every command: an option outside it is refused
// with 238 naming it, and every option in it is accepted (it may fail for its value, never as
// not implemented).
func TestOptionTable(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t)
	table := embedded.OptionTable()
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	run := func(name string, extra ...bson.E) error {
		cmd := append(bson.D{{Key: name, Value: firstValue(name)}}, extra...)
		db := e.db
		if name == "configureFailPoint" || name == "listDatabases" || name == "renameCollection" || name == "killAllSessions" {
			db = e.c.Database("admin")
		}
		return db.RunCommand(e.ctx, cmd).Err()
	}
	for _, name := range names {
		fields := table[name]
		t.Run(name, func(t *testing.T) {
			err := run(name, bson.E{Key: "zzNotAnOption", Value: 1})
			// A command taking any field (hello, getParameter) checks them itself.
			if !slices.Contains(fields, "*") && !refusedNaming(err, "zzNotAnOption") {
				t.Errorf("unknown option: err = %v, want 238 naming it", err)
			}
			for _, f := range fields {
				if f == "*" {
					continue
				}
				if err := run(name, bson.E{Key: f, Value: 1}); refusedNaming(err, f) {
					t.Errorf("listed option %s refused: %v", f, err)
				}
			}
			for _, f := range embedded.GenericFields {
				v, ok := optionValues[f]
				if !ok {
					continue
				}
				if err := run(name, bson.E{Key: f, Value: v}); errCode(err) == 238 {
					t.Errorf("generic field %s refused: %v", f, err)
				}
			}
			for _, level := range embedded.ReadConcernLevels {
				rc := bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: level}}}
				if name == "aggregate" {
					break // a change stream takes majority only; the fidelity tests cover it
				}
				if err := run(name, rc); errCode(err) == 238 || (errCode(err) == 72 && strings.Contains(errMessage(err), "readConcern")) {
					t.Errorf("readConcern level %s refused: %v", level, err)
				}
			}
			err = run(name, bson.E{Key: "readConcern", Value: bson.D{{Key: "level", Value: "snapshot"}}})
			want := int32(72)
			if slices.Contains(embedded.SnapshotReadCommands, name) {
				want = 238
			}
			if errCode(err) != want {
				t.Errorf("readConcern snapshot: err = %v, want code %d", err, want)
			}
			err = run(name, bson.E{Key: "apiVersion", Value: "1"}, bson.E{Key: "apiStrict", Value: true})
			if inV1 := slices.Contains(embedded.APIV1Commands, name); inV1 == (errCode(err) == 323) {
				t.Errorf("apiStrict (in API V1: %v): err = %v", inV1, err)
			}
		})
	}
}

// stageArgs, operatorValues: a valid argument for each stage and operator the table lists.
var (
	stageArgs = map[string]any{
		"$match": bson.D{}, "$group": bson.D{{Key: "_id", Value: nil}}, "$sort": bson.D{{Key: "a", Value: 1}},
		"$project": bson.D{{Key: "a", Value: 1}}, "$addFields": bson.D{{Key: "b", Value: 1}}, "$set": bson.D{{Key: "b", Value: 1}},
		"$unset": "b", "$limit": 1, "$skip": 1, "$count": "n", "$unwind": "$a",
		"$replaceRoot": bson.D{{Key: "newRoot", Value: "$$ROOT"}}, "$replaceWith": "$$ROOT", "$changeStream": bson.D{},
		"$documents": bson.A{}, "$out": "o", "$merge": "m",
	}
	queryValues = map[string]any{
		"$and": bson.A{bson.D{}}, "$or": bson.A{bson.D{}}, "$nor": bson.A{bson.D{{Key: "a", Value: 9}}},
		"$expr": true, "$comment": "c",
	}
	// refusedStages, refusedQuery and refusedUpdate are MongoDB's, outside the table: 238.
	refusedStages = []string{"$lookup", "$facet", "$bucket", "$graphLookup", "$unionWith", "$sample", "$setWindowFields", "$sortByCount", "$redact"}
	refusedQuery  = []string{"$where", "$text", "$near", "$bitsAllSet", "$jsonSchema", "$geoWithin"}
	refusedUpdate = []string{"$rename", "$mul", "$pop", "$pullAll", "$bit"}
)

// TestOperatorTable walks the stages and operators of the table: each listed one runs, every
// other MongoDB one is refused with 238 naming it.
func TestOperatorTable(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	aggregate := func(stage string, arg any) error {
		target := any("c")
		if stage == "$documents" {
			target = 1
		}
		return e.db.RunCommand(e.ctx, bson.D{{Key: "aggregate", Value: target},
			{Key: "pipeline", Value: bson.A{bson.D{{Key: stage, Value: arg}}}}, {Key: "cursor", Value: bson.D{}}}).Err()
	}
	for _, st := range embedded.AggregateStages {
		if err := aggregate(st, stageArgs[st]); err != nil {
			t.Errorf("stage %s: %v", st, err)
		}
	}
	for _, st := range refusedStages {
		if err := aggregate(st, bson.D{}); errCode(err) != 238 || !strings.Contains(errMessage(err), st) {
			t.Errorf("stage %s: %v, want 238 naming it", st, err)
		}
	}
	find := func(filter bson.D) error {
		return e.db.RunCommand(e.ctx, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: filter}}).Err()
	}
	for _, op := range embedded.QueryOperators {
		filter := bson.D{{Key: "a", Value: bson.D{{Key: op, Value: queryOperand(op)}}}}
		if op == "$options" {
			filter = bson.D{{Key: "a", Value: bson.D{{Key: "$regex", Value: "x"}, {Key: op, Value: "i"}}}}
		}
		if v, top := queryValues[op]; top {
			filter = bson.D{{Key: op, Value: v}}
		}
		if err := find(filter); err != nil {
			t.Errorf("query operator %s: %v", op, err)
		}
	}
	for _, op := range refusedQuery {
		if err := find(bson.D{{Key: "a", Value: bson.D{{Key: op, Value: 1}}}}); op == "$where" || op == "$text" || op == "$jsonSchema" {
			err = find(bson.D{{Key: op, Value: bson.D{}}})
			if errCode(err) != 238 || !strings.Contains(errMessage(err), op) {
				t.Errorf("query operator %s: %v, want 238 naming it", op, err)
			}
		} else if errCode(err) != 238 || !strings.Contains(errMessage(err), op) {
			t.Errorf("query operator %s: %v, want 238 naming it", op, err)
		}
	}
	update := func(op string, v any) error {
		return e.db.RunCommand(e.ctx, bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: op, Value: bson.D{{Key: "b", Value: v}}}}}},
		}}}).Err()
	}
	for _, op := range embedded.UpdateOperators {
		// Each on a fresh field b: unset first.
		if err := update("$unset", ""); err != nil {
			t.Fatal(err)
		}
		v := any(int32(1))
		if op == "$currentDate" {
			v = true
		}
		if err := update(op, v); err != nil {
			t.Errorf("update operator %s: %v", op, err)
		}
	}
	for _, op := range refusedUpdate {
		err := update(op, int32(1))
		if errCode(err) != 238 || !strings.Contains(errMessage(err), op) {
			t.Errorf("update operator %s: %v, want 238 naming it", op, err)
		}
	}
}

// queryOperand is a valid operand of a field-level query operator.
func queryOperand(op string) any {
	switch op {
	case "$in", "$nin", "$all":
		return bson.A{int32(1)}
	case "$exists":
		return true
	case "$not":
		return bson.D{{Key: "$gt", Value: 5}}
	case "$regex":
		return "x"
	case "$elemMatch":
		return bson.D{{Key: "$gt", Value: 0}}
	case "$type":
		return "array"
	case "$mod":
		return bson.A{int32(2), int32(0)}
	}
	return int32(1)
}

// optionTableDoc renders the option table as docs/spec-tests.md shows it.
func optionTableDoc() string {
	table := embedded.OptionTable()
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("| command | options it implements (besides the generic ones) | readConcern snapshot | apiStrict |\n|---|---|---|---|\n")
	for _, n := range names {
		f := slices.Clone(table[n])
		sort.Strings(f)
		opts := "—"
		if slices.Contains(f, "*") {
			opts = "any field"
		} else if len(f) > 0 {
			opts = "`" + strings.Join(f, "`, `") + "`"
		}
		snap := "refused: 72 InvalidOptions (as mongod)"
		if slices.Contains(embedded.SnapshotReadCommands, n) {
			snap = "refused: 238 NotImplemented"
		}
		api := "refused: 323 APIStrictError"
		if slices.Contains(embedded.APIV1Commands, n) {
			api = "accepted (API V1)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", n, opts, snap, api)
	}
	fmt.Fprintf(&b, "\nGeneric fields, accepted by every command: `%s`.\n", strings.Join(embedded.GenericFields, "`, `"))
	fmt.Fprintf(&b, "readConcern levels served: `%s`; `snapshot` as in the table; any other level: 2 BadValue.\n",
		strings.Join(embedded.ReadConcernLevels, "`, `"))
	fmt.Fprintf(&b, "Exhaust streaming (OP_MSG exhaustAllowed) refused with 238 on: `%s`.\n", strings.Join(embedded.ExhaustCommands, "`, `"))
	fmt.Fprintf(&b, "\nChecked where they are compiled (every other one MongoDB has: 238 naming it):\n\n")
	fmt.Fprintf(&b, "- aggregation stages: `%s`\n", strings.Join(embedded.AggregateStages, "`, `"))
	fmt.Fprintf(&b, "- query operators: `%s`\n", strings.Join(embedded.QueryOperators, "`, `"))
	fmt.Fprintf(&b, "- update operators: `%s`\n", strings.Join(embedded.UpdateOperators, "`, `"))
	return b.String()
}

// TestOptionTableDoc checks docs/spec-tests.md shows the option table as it is
// (go test -run TestOptionTableDoc -update-spec-doc rewrites it).
func TestOptionTableDoc(t *testing.T) {
	const path = "../docs/spec-tests.md"
	const begin, end = "<!-- option-table:begin (generated by TestOptionTableDoc) -->\n", "<!-- option-table:end -->"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the option-table markers", path)
	}
	want := optionTableDoc()
	if got := doc[i+len(begin) : j]; got != want {
		if *updateSpecDoc {
			if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's option table is stale; run go test -run TestOptionTableDoc -update-spec-doc", path)
	}
}
