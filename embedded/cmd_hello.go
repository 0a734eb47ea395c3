package embedded

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
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
	f = append(f, s.helloAuth(r)...)
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
