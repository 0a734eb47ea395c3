package embedded

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// Server identity advertised to clients: MongoDB 7.0 (wire version 21).
const (
	serverVersion  = "7.0.0"
	maxWireVersion = 21
	// electionTerm is the single member's constant term.
	electionTerm = int64(1)
)

func cmdHello(ctx context.Context, s *Server, r *request) (result, error) {
	if client, ok := r.arg("client"); ok {
		if app, ok := bsonval.Lookup(asDoc(client), "application.name"); ok {
			if name, ok := app.(string); ok {
				r.conn.SetAppName(name)
			}
		}
	}
	if lb, ok := r.arg("loadBalanced"); ok && boolArg(lb) {
		return result{}, mongoerr.NotImplementedf("load-balanced mode (hello.loadBalanced)")
	}
	if err := s.awaitTopologyChange(ctx, r); err != nil {
		return result{}, err
	}
	now := time.Now()
	last := s.clusterTimeFor(bson.Timestamp{})
	opTime := bson.D{{Key: "ts", Value: last}, {Key: "t", Value: electionTerm}}
	lastDate := bson.NewDateTimeFromTime(time.Unix(int64(last.T), 0))
	primaryKey := "isWritablePrimary"
	if r.name != "hello" {
		primaryKey = "ismaster"
	}
	f := bson.D{}
	if ok, _ := r.arg("helloOk"); ok != nil && boolArg(ok) {
		f = append(f, bson.E{Key: "helloOk", Value: true})
	}
	f = append(f,
		bson.E{Key: "topologyVersion", Value: s.topologyVersion()},
		bson.E{Key: "hosts", Value: bson.A{s.addr}},
		bson.E{Key: "setName", Value: s.cfg.ReplSetName},
		bson.E{Key: "setVersion", Value: int32(1)},
		bson.E{Key: primaryKey, Value: true},
		bson.E{Key: "secondary", Value: false},
		bson.E{Key: "primary", Value: s.addr},
		bson.E{Key: "me", Value: s.addr},
		bson.E{Key: "electionId", Value: bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}},
		bson.E{Key: "lastWrite", Value: bson.D{
			{Key: "opTime", Value: opTime},
			{Key: "lastWriteDate", Value: lastDate},
			{Key: "majorityOpTime", Value: opTime},
			{Key: "majorityWriteDate", Value: lastDate},
		}},
		bson.E{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(48000000)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(100000)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)},
		bson.E{Key: "connectionId", Value: int32(r.conn.ID)},
		bson.E{Key: "minWireVersion", Value: int32(0)},
		bson.E{Key: "maxWireVersion", Value: int32(maxWireVersion)},
		bson.E{Key: "readOnly", Value: false},
	)
	return result{fields: f}, nil
}

func (s *Server) topologyVersion() bson.D {
	return bson.D{{Key: "processId", Value: s.processID}, {Key: "counter", Value: int64(0)}}
}

// awaitTopologyChange implements the awaitable hello of server monitoring: when the client
// sends our current topologyVersion with maxAwaitTimeMS, the reply waits that long (the
// topology of a single node never changes) or until the server shuts down.
func (s *Server) awaitTopologyChange(ctx context.Context, r *request) error {
	tv, ok := r.arg("topologyVersion")
	if !ok {
		return nil
	}
	waitV, ok := r.arg("maxAwaitTimeMS")
	if !ok {
		return nil
	}
	wait, ok := toInt64(waitV)
	if !ok || wait < 0 {
		return mongoerr.BadValuef("maxAwaitTimeMS must be a non-negative integer")
	}
	pid, _ := bsonval.Get(asDoc(tv), "processId")
	if pid != s.processID {
		return nil // the client knows an older process: answer at once
	}
	t := time.NewTimer(time.Duration(wait) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
	return nil
}

func cmdPing(context.Context, *Server, *request) (result, error) { return result{}, nil }

func cmdBuildInfo(context.Context, *Server, *request) (result, error) {
	return result{fields: bson.D{
		{Key: "version", Value: serverVersion},
		{Key: "gitVersion", Value: "rollup-embedded"},
		{Key: "versionArray", Value: bson.A{int32(7), int32(0), int32(0), int32(0)}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		{Key: "storageEngines", Value: bson.A{"rollup-embedded"}},
		{Key: "modules", Value: bson.A{}},
	}}, nil
}

func cmdGetParameter(_ context.Context, s *Server, r *request) (result, error) {
	known := bson.D{
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "7.0"}}},
		{Key: "enableTestCommands", Value: s.cfg.EnableTestCommands},
		{Key: "maxBSONDepth", Value: int32(200)},
	}
	arg := r.body[0].Value
	if str, ok := arg.(string); ok && str == "*" {
		return result{fields: known}, nil
	}
	var out bson.D
	for _, e := range r.body[1:] {
		if isGenericField(e.Key) {
			continue
		}
		v, ok := bsonval.Get(known, e.Key)
		if !ok {
			return result{}, mongoerr.NotImplementedf("getParameter '%s'", e.Key)
		}
		out = append(out, bson.E{Key: e.Key, Value: v})
	}
	if len(out) == 0 {
		return result{}, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	return result{fields: out}, nil
}

func cmdEndSessions(_ context.Context, s *Server, r *request) (result, error) {
	ids, ok := r.body[0].Value.(bson.A)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("endSessions takes an array of session ids")
	}
	for _, id := range ids {
		s.sessions.end(asDoc(id))
	}
	return result{}, nil
}

func cmdKillAllSessions(_ context.Context, s *Server, _ *request) (result, error) {
	s.sessions.endAll()
	return result{}, nil
}

func cmdListDatabases(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "listDatabases may only be run against the admin database.")
	}
	filter, nameOnly, err := listArgs(r)
	if err != nil {
		return result{}, err
	}
	var dbs bson.A
	var total int64
	s.engine.Read(func(rd *storage.Reader) {
		for _, d := range rd.Databases() {
			doc := bson.D{{Key: "name", Value: d.Name}}
			if !nameOnly {
				doc = append(doc, bson.E{Key: "sizeOnDisk", Value: d.SizeOnDisk}, bson.E{Key: "empty", Value: d.Empty})
			}
			// Compiled without $expr, the filter cannot fail.
			if ok, _ := filter.Match(doc); !ok {
				continue
			}
			total += d.SizeOnDisk
			dbs = append(dbs, doc)
		}
	})
	if dbs == nil {
		dbs = bson.A{}
	}
	f := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		f = append(f, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return result{fields: f}, nil
}

// asDoc returns v as a document, or an empty one.
func asDoc(v any) bson.D {
	d, _ := v.(bson.D)
	return d
}
