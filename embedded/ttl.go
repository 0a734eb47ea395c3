package embedded

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// DefaultTTLMonitorInterval is how often the TTL monitor runs by default (MongoDB's
// ttlMonitorSleepSecs, 60 s): expired documents may live up to this long past their expiry.
const DefaultTTLMonitorInterval = 60 * time.Second

// ttlBatch bounds the documents one engine write of the TTL monitor deletes, so that a large
// backlog never holds the write lock for long.
const ttlBatch = 1000

// runTTLMonitor is MongoDB's TTL monitor: every TTLMonitorInterval it deletes the documents
// that TTL indexes say have expired.
func (s *Server) runTTLMonitor(ctx context.Context) {
	t := time.NewTicker(s.cfg.TTLMonitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.ttlPass(ctx)
		}
	}
}

// ttlPass deletes every expired document of every TTL index, in batches of ttlBatch, each an
// ordinary logged write (so the deletes are durable and appear in change streams). A failure
// is logged and the pass moves on; the next pass retries.
func (s *Server) ttlPass(ctx context.Context) {
	var idx []storage.TTLIndex
	s.engine.Read(func(rd *storage.Reader) { idx = rd.TTLIndexes() })
	for _, ix := range idx {
		total := 0
		for ctx.Err() == nil {
			var n int
			_, err := s.engine.Write(ctx, func(w *storage.Writer) error {
				var err error
				n, err = w.DeleteExpired(ix.DB, ix.Coll, ix.Spec.Name, time.Now(), ttlBatch)
				return err
			})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("ttl monitor: delete expired documents", zap.String("ns", ix.DB+"."+ix.Coll),
						zap.String("index", ix.Spec.Name), zap.Error(err))
				}
				break
			}
			total += n
			if n < ttlBatch {
				break
			}
		}
		if total > 0 {
			s.log.Debug("ttl monitor: deleted expired documents", zap.String("ns", ix.DB+"."+ix.Coll),
				zap.String("index", ix.Spec.Name), zap.Int("deleted", total))
		}
	}
}

// collModIndex applies the index part of a collMod command ({keyPattern: {...}} or
// {name: "..."}, with expireAfterSeconds) inside a write and returns the reply fields MongoDB
// gives for it (expireAfterSeconds_old, expireAfterSeconds_new). Index options other than
// expireAfterSeconds are NotImplemented. The collMod command handler calls it with the
// command's index argument.
func collModIndex(w *storage.Writer, db, coll string, arg any) (bson.D, error) {
	spec, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field 'collMod.index' is the wrong type '%s', expected type 'object'", typeName(arg))
	}
	var name string
	var keyPattern bson.D
	var secs any
	for _, e := range spec {
		switch e.Key {
		case "name":
			n, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.TypeMismatchf("BSON field 'collMod.index.name' is the wrong type '%s', expected type 'string'", typeName(e.Value))
			}
			name = n
		case "keyPattern":
			k, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.TypeMismatchf("BSON field 'collMod.index.keyPattern' is the wrong type '%s', expected type 'object'", typeName(e.Value))
			}
			keyPattern = k
		case "expireAfterSeconds":
			secs = e.Value
		case "hidden", "prepareUnique", "unique", "forceNonUnique":
			return nil, mongoerr.NotImplementedf("collMod index option '%s'", e.Key)
		default:
			return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field 'collMod.index.%s' is an unknown field.", e.Key)
		}
	}
	switch {
	case name != "" && keyPattern != nil:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Cannot specify both key pattern and name.")
	case name == "" && keyPattern == nil:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "Must specify either index name or key pattern.")
	case secs == nil:
		return nil, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds or hidden field")
	}
	info, ok := w.Collection(db, coll)
	if !ok {
		return nil, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", db, coll)
	}
	if keyPattern != nil {
		for _, ix := range info.Indexes {
			if bsonval.Compare(ix.Key, keyPattern) == 0 {
				name = ix.Name
			}
		}
		if name == "" {
			return nil, mongoerr.New(mongoerr.IndexNotFound, "cannot find index %s for ns %s.%s", bsonval.Format(keyPattern), db, coll)
		}
	}
	n, err := expireAfterSecondsArg(secs, spec)
	if err != nil {
		return nil, err
	}
	old, err := w.SetExpireAfterSeconds(db, coll, name, n)
	if err != nil {
		return nil, err
	}
	return bson.D{
		{Key: "expireAfterSeconds_old", Value: int32(old)},
		{Key: "expireAfterSeconds_new", Value: int32(n)},
	}, nil
}
