package embedded

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// The option table: what each command accepts besides its own fields (commandSpec.fields),
// checked before its handler runs (checkOptions). Anything outside it is refused, with 238
// NotImplemented naming it where MongoDB has it and the server does not, or with MongoDB's own
// error where MongoDB refuses it too; never silently ignored.

// genericFields are the fields every command accepts: driver plumbing, and options whose
// effect the server gives in full (a single durable node satisfies every write concern it
// accepts, every read is of committed data, maxTimeMS bounds the command, comment is inert).
var genericFields = []string{
	"$db", "lsid", "$clusterTime", "txnNumber", "$readPreference", "readConcern", "writeConcern",
	"apiVersion", "apiStrict", "apiDeprecationErrors", "comment", "maxTimeMS", "$client",
}

// isGenericField reports a field of genericFields.
func isGenericField(key string) bool { return slices.Contains(genericFields, key) }

// readConcernLevels are the levels the server serves for every command that reads: a single
// node's committed data is its majority-committed data, and reads of it are linearizable.
var readConcernLevels = []string{"local", "available", "majority", "linearizable"}

// snapshotReadCommands are the commands MongoDB 5.0+ runs with readConcern "snapshot" outside
// a transaction; the embedded server keeps no snapshots, so it refuses them with 238. Every
// other command is refused with InvalidOptions, as mongod does.
var snapshotReadCommands = []string{"find", "aggregate", "distinct"}

// apiV1Commands are the commands of Stable API version 1 that the server implements; with
// apiStrict: true any other command fails with APIStrictError, as in mongod.
var apiV1Commands = []string{
	"aggregate", "collMod", "count", "create", "createIndexes", "delete", "drop", "dropDatabase",
	"dropIndexes", "endSessions", "explain", "find", "findAndModify", "findandmodify", "getMore", "hello", "insert",
	"killCursors", "listCollections", "listDatabases", "listIndexes", "ping", "update",
}

// exhaustCommands are the commands a client may ask to stream (OP_MSG exhaustAllowed): mongod
// streams getMore replies; the embedded server does not, so it refuses.
var exhaustCommands = []string{"getMore"}

// checkOptions checks the options every command shares against the table: the API version,
// the read concern, and exhaust streaming.
func checkOptions(r *request) error {
	if err := checkAPI(r); err != nil {
		return err
	}
	if v, ok := r.arg("readConcern"); ok {
		if err := checkReadConcern(r.name, v, r.body); err != nil {
			return err
		}
	}
	if r.conn != nil && r.conn.ExhaustAllowed() && slices.Contains(exhaustCommands, r.name) {
		return mongoerr.NotImplementedf("exhaust cursors (OP_MSG flag exhaustAllowed on '%s')", r.name)
	}
	return nil
}

// checkAPI checks apiVersion, apiStrict and apiDeprecationErrors as mongod does.
func checkAPI(r *request) error {
	v, hasVersion := r.arg("apiVersion")
	_, hasStrict := r.arg("apiStrict")
	_, hasDep := r.arg("apiDeprecationErrors")
	if !hasVersion {
		if hasStrict || hasDep {
			return mongoerr.New(4886600, "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion")
		}
		return nil
	}
	if s, ok := v.(string); !ok || s != "1" {
		return mongoerr.New(322, "API version must be \"1\"")
	}
	if strict, _ := r.arg("apiStrict"); strict == true && !slices.Contains(apiV1Commands, r.name) {
		return mongoerr.New(mongoerr.APIStrictError, "Provided apiStrict:true, but the command %s is not in API Version 1", r.name)
	}
	return nil
}

// checkReadConcern checks a readConcern argument for command name.
func checkReadConcern(name string, v any, body bson.D) error {
	rc, ok := v.(bson.D)
	if !ok {
		return mongoerr.TypeMismatchf("BSON field 'readConcern' is the wrong type '%s', expected type 'object'", typeName(v))
	}
	level, atTime := "", false
	for _, e := range rc {
		switch e.Key {
		case "level":
			s, ok := e.Value.(string)
			if !ok {
				return mongoerr.TypeMismatchf("BSON field 'readConcern.level' is the wrong type '%s', expected type 'string'", typeName(e.Value))
			}
			level = s
		case "afterClusterTime", "provenance":
			// Causal consistency: every committed write is visible to the next read.
		case "atClusterTime":
			atTime = true
		default:
			return mongoerr.NotImplementedf("readConcern field '%s' of command '%s'", e.Key, name)
		}
	}
	if atTime && level != "snapshot" {
		return mongoerr.New(mongoerr.InvalidOptions, "atClusterTime must be used with snapshot read concern")
	}
	switch {
	case level == "" || slices.Contains(readConcernLevels, level):
	case level == "snapshot" && slices.Contains(snapshotReadCommands, name):
		return mongoerr.NotImplementedf("readConcern level 'snapshot' (command '%s')", name)
	case level == "snapshot":
		return mongoerr.New(mongoerr.InvalidOptions, "Command %s does not support { readConcern: { level: \"snapshot\" } } outside a multi-document transaction", name)
	default:
		return mongoerr.BadValuef("Enumeration value '%s' for field 'readConcern.level' is not a valid value.", level)
	}
	if name == "aggregate" && isChangeStream(body) && level != "" && level != "majority" {
		return mongoerr.New(mongoerr.InvalidOptions, "Aggregation stage $changeStream cannot run with a readConcern other than 'majority'. Current readConcern: %s", level)
	}
	return nil
}

// isChangeStream reports an aggregate whose pipeline opens with $changeStream.
func isChangeStream(body bson.D) bool {
	for _, e := range body {
		if e.Key != "pipeline" {
			continue
		}
		arr, _ := e.Value.(bson.A)
		if len(arr) == 0 {
			return false
		}
		first, _ := arr[0].(bson.D)
		return len(first) > 0 && first[0].Key == "$changeStream"
	}
	return false
}

// The rows of the table checked where they are compiled (packages aggregate and query), which
// refuse anything else MongoDB has with 238 naming it; TestOptionTable walks them.
var (
	// aggregateStages are the pipeline stages the server runs ($changeStream first only,
	// $documents in a database-level aggregate, $out and $merge last).
	aggregateStages = []string{"$match", "$group", "$sort", "$project", "$addFields", "$set", "$unset",
		"$limit", "$skip", "$count", "$unwind", "$replaceRoot", "$replaceWith", "$changeStream",
		"$documents", "$out", "$merge"}
	// queryOperators are the query operators of filters.
	queryOperators = []string{"$and", "$or", "$nor", "$expr", "$comment", "$eq", "$ne", "$gt", "$gte",
		"$lt", "$lte", "$in", "$nin", "$exists", "$not", "$regex", "$options", "$elemMatch", "$type",
		"$size", "$all", "$mod"}
	// updateOperators are the update operators of update documents (pipeline-style updates
	// take the stages $set, $addFields, $unset, $project, $replaceRoot and $replaceWith).
	updateOperators = []string{"$set", "$setOnInsert", "$unset", "$inc", "$min", "$max", "$push",
		"$addToSet", "$pull", "$currentDate"}
)
