package embedded

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// Change streams read the storage engine's oplog, which holds every durable mutation in
// commit order. A stream's position is the OpTime of the last oplog entry it has consumed;
// the resume token of an event (and the postBatchResumeToken of a batch) encodes that
// position, so resuming continues exactly after it: no event is skipped or repeated.

// defaultMaxAwait is how long a getMore on a change stream waits for events when the client
// sends no maxTimeMS (mongod's default await time for tailable cursors).
const defaultMaxAwait = time.Second

// Resume-token kinds (the last byte of _data).
const (
	tokenEvent      = 0x00
	tokenInvalidate = 0x01
	tokenHighWater  = 0x02
)

type streamScope int

const (
	scopeCollection streamScope = iota
	scopeDatabase
	scopeCluster
)

// changeStream is the state of a $changeStream cursor.
type changeStream struct {
	scope        streamScope
	db, coll     string
	after        storage.OpTime // entries with TS > after are next
	fullDocument string
	// beforeChange is fullDocumentBeforeChange: "whenAvailable", "required", or "" (off).
	beforeChange string
	// expanded is showExpandedEvents: DDL events (create, createIndexes, dropIndexes,
	// modify) and the expanded fields (collectionUUID, operationDescription,
	// updateDescription.disambiguatedPaths).
	expanded bool
	post     *aggregate.Pipeline // stages after $changeStream, nil if none
	probe    *streamProbe        // pre-filter of document events (nil: none)
	// pendingInvalidate is set when the stream resumed right after the drop that
	// invalidates it: the invalidate event comes next.
	pendingInvalidate *storage.Entry
	invalidated       bool
	// raw: its document events are built from the entries' encoding (see changeraw.go),
	// and rawProbes decide its stages, one per stage, but a last inclusion $project,
	// rawProject (nil: none), which the raw path applies.
	raw        bool
	rawProbes  []*streamProbe
	rawProject *rawProjection
	// The postBatchResumeToken is encodeToken(pbrtTS, pbrtKind): the last event's token when
	// the batch ended on an event, a high-water-mark token at the position when it scanned
	// past events. Kept as its parts, so that scanning an entry formats no token.
	pbrtTS   storage.OpTime
	pbrtKind byte
}

// setPBRT moves the postBatchResumeToken.
func (cs *changeStream) setPBRT(ts storage.OpTime, kind byte) { cs.pbrtTS, cs.pbrtKind = ts, kind }

// pbrt returns the postBatchResumeToken.
func (cs *changeStream) pbrt() bson.D { return encodeToken(cs.pbrtTS, cs.pbrtKind) }

// encodeToken returns a resume token {_data: hex} ordered by cluster time.
func encodeToken(ts storage.OpTime, kind byte) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("82%08X%08X%02X", ts.T, ts.I, kind)}}
}

// decodeToken parses a resume token produced by encodeToken.
func decodeToken(v any) (storage.OpTime, byte, error) {
	d, ok := v.(bson.D)
	if !ok {
		return storage.OpTime{}, 0, mongoerr.New(mongoerr.InvalidResumeToken, "resume token must be an object with a _data string, got %s", typeName(v))
	}
	data, _ := bsonval.Get(d, "_data")
	str, ok := data.(string)
	if !ok || len(d) != 1 {
		return storage.OpTime{}, 0, mongoerr.New(mongoerr.InvalidResumeToken, "malformed resume token: expected {_data: <hex string>}")
	}
	b, err := hex.DecodeString(str)
	if err != nil || len(b) != 10 || b[0] != 0x82 || b[9] > tokenHighWater {
		return storage.OpTime{}, 0, mongoerr.New(mongoerr.InvalidResumeToken, "malformed resume token %q: not issued by this server", str)
	}
	ts := storage.OpTime{
		T: uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]),
		I: uint32(b[5])<<24 | uint32(b[6])<<16 | uint32(b[7])<<8 | uint32(b[8]),
	}
	return ts, b[9], nil
}

func tsLess(a, b storage.OpTime) bool {
	return a.T < b.T || (a.T == b.T && a.I < b.I)
}

// predecessor returns the largest OpTime before ts, so "TS > predecessor(ts)" means "TS >= ts".
func predecessor(ts storage.OpTime) storage.OpTime {
	if ts.I > 0 {
		return storage.OpTime{T: ts.T, I: ts.I - 1}
	}
	if ts.T == 0 {
		return ts
	}
	return storage.OpTime{T: ts.T - 1, I: ^uint32(0)}
}

// historyLost is the error for a resume point older than the retained oplog.
func historyLost() error {
	return &mongoerr.Error{
		Code:   mongoerr.ChangeStreamHistoryLost,
		Msg:    "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
		Labels: []string{"NonResumableChangeStreamError"},
	}
}

// checkHistory fails when entries after the position may have been dropped by retention:
// the oldest retained entry must be at or before the position (the server writes a
// local.startup_log entry at every start, so this holds for any stream opened since).
func (s *Server) checkHistory(after storage.OpTime) error {
	first, _ := s.engine.OplogRange()
	if (first.T != 0 || first.I != 0) && tsLess(after, first) {
		return historyLost()
	}
	return nil
}

func (s *Server) openChangeStream(_ context.Context, r *request, stages []bson.D, batchSize int64) (result, error) {
	cs := &changeStream{fullDocument: "default"}
	switch c := r.body[0].Value.(type) {
	case string:
		coll, err := collArg(r)
		if err != nil {
			return result{}, err
		}
		cs.scope, cs.db, cs.coll = scopeCollection, r.db, coll
	default:
		if n, ok := toInt64(c); !ok || n != 1 {
			return result{}, mongoerr.FailedToParsef("aggregate must name a collection or be 1")
		}
		cs.scope, cs.db = scopeDatabase, r.db
	}
	opts := asDoc(stages[0][0].Value)
	if _, ok := stages[0][0].Value.(bson.D); !ok {
		return result{}, mongoerr.FailedToParsef("the $changeStream stage specification must be an object")
	}
	var resumeAfter, startAfter, startAt any
	allCluster := false
	for _, e := range opts {
		switch e.Key {
		case "fullDocument":
			mode, _ := e.Value.(string)
			switch mode {
			case "default", "updateLookup", "whenAvailable", "required":
				cs.fullDocument = mode
			default:
				return result{}, mongoerr.BadValuef("unknown fullDocument mode %q", e.Value)
			}
		case "fullDocumentBeforeChange":
			mode, _ := e.Value.(string)
			switch mode {
			case "off":
				cs.beforeChange = ""
			case "whenAvailable", "required":
				cs.beforeChange = mode
			default:
				return result{}, mongoerr.BadValuef("unknown fullDocumentBeforeChange mode %q", e.Value)
			}
		case "resumeAfter":
			resumeAfter = e.Value
		case "startAfter":
			startAfter = e.Value
		case "startAtOperationTime":
			startAt = e.Value
		case "allChangesForCluster":
			allCluster = boolArg(e.Value)
		case "showExpandedEvents":
			cs.expanded = boolArg(e.Value)
		case "showRawUpdateDescription", "showSystemEvents", "showMigrationEvents", "allowToRunOnConfigDB", "allowToRunOnSystemNS":
			return result{}, mongoerr.NotImplementedf("$changeStream option '%s'", e.Key)
		default:
			return result{}, mongoerr.New(40415, "BSON field '$changeStream.%s' is an unknown field.", e.Key)
		}
	}
	if allCluster {
		if r.db != "admin" || cs.scope != scopeDatabase {
			return result{}, mongoerr.New(mongoerr.InvalidOptions, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name")
		}
		cs.scope, cs.db = scopeCluster, ""
	} else if r.db == "admin" || r.db == "config" || r.db == "local" {
		return result{}, mongoerr.New(mongoerr.InvalidNamespace, "$changeStream may not be opened on the internal %s database", r.db)
	}
	set := 0
	for _, v := range []any{resumeAfter, startAfter, startAt} {
		if v != nil {
			set++
		}
	}
	if resumeAfter != nil && startAfter != nil {
		return result{}, mongoerr.New(50865, "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage")
	}
	if set > 1 {
		return result{}, mongoerr.New(40674, "Only one type of resume option is allowed, but multiple were found")
	}
	switch {
	case resumeAfter != nil || startAfter != nil:
		tok := resumeAfter
		if tok == nil {
			tok = startAfter
		}
		ts, kind, err := decodeToken(tok)
		if err != nil {
			return result{}, err
		}
		if kind == tokenInvalidate && resumeAfter != nil {
			return result{}, mongoerr.New(mongoerr.InvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification")
		}
		cs.after = ts
		if kind == tokenEvent {
			cs.pendingInvalidate = s.invalidatingEntryAt(cs, ts)
		}
	case startAt != nil:
		ts, ok := startAt.(bson.Timestamp)
		if !ok {
			return result{}, mongoerr.TypeMismatchf("startAtOperationTime must be a timestamp")
		}
		cs.after = predecessor(ts)
	default:
		cs.after = s.engine.LastOpTime()
	}
	if err := s.checkHistory(cs.after); err != nil {
		return result{}, err
	}
	cs.setPBRT(cs.after, tokenHighWater)
	if len(stages) > 1 {
		for _, st := range stages[1:] {
			if err := checkStreamStage(st); err != nil {
				return result{}, err
			}
		}
		p, err := aggregate.Compile(stages[1:])
		if err != nil {
			return result{}, err
		}
		cs.post = p
		cs.probe = newStreamProbe(stages[1], cs.fullDocument)
	}
	cs.rawProbes, cs.rawProject, cs.raw = rawEventsFor(cs, stages[1:])
	ns := r.db + ".$cmd.aggregate"
	if cs.scope == scopeCollection {
		ns = r.db + "." + cs.coll
	}
	c := &cursor{ns: ns, stream: cs}
	// The first batch returns what is already there, without waiting.
	batch, err := s.streamBatch(cs, batchSize)
	if err != nil {
		return result{}, err
	}
	var id int64
	if !cs.invalidated {
		id = s.cursors.add(c)
	}
	return result{fields: cursorReply(id, ns, "firstBatch", batch,
		bson.E{Key: "postBatchResumeToken", Value: cs.pbrt()})}, nil
}

// invalidatingEntryAt returns the oplog entry at ts when it is a drop that invalidates cs.
func (s *Server) invalidatingEntryAt(cs *changeStream, ts storage.OpTime) *storage.Entry {
	for _, e := range s.engine.OplogAfter(predecessor(ts), 1) {
		if e.TS == ts && cs.invalidatedBy(&e) {
			return &e
		}
	}
	return nil
}

// invalidatedBy reports the entries that end a stream with an invalidate event: for a
// collection, its drop and a rename from or to its name; for a database, its drop.
func (cs *changeStream) invalidatedBy(e *storage.Entry) bool {
	switch cs.scope {
	case scopeCollection:
		switch e.Op {
		case storage.OpDrop:
			return e.DB == cs.db && e.Coll == cs.coll
		case storage.OpRename:
			return (e.DB == cs.db && e.Coll == cs.coll) || (e.Rename != nil && e.Rename.To.DB == cs.db && e.Rename.To.Coll == cs.coll)
		}
	case scopeDatabase:
		return e.Op == storage.OpDropDatabase && e.DB == cs.db
	}
	return false
}

// inScope reports the entries of the stream's namespaces (a rename also belongs to the
// namespace it renames to).
func (cs *changeStream) inScope(e *storage.Entry) bool {
	if e.Rename != nil && cs.nsInScope(e.Rename.To.DB, e.Rename.To.Coll) {
		return true
	}
	return cs.nsInScope(e.DB, e.Coll)
}

func (cs *changeStream) nsInScope(db, coll string) bool {
	if db == "admin" || db == "config" || db == "local" || strings.HasPrefix(coll, "system.") {
		return false
	}
	switch cs.scope {
	case scopeCollection:
		return db == cs.db && coll == cs.coll
	case scopeDatabase:
		return db == cs.db
	}
	return true
}

func (s *Server) changeStreamGetMore(ctx context.Context, c *cursor, r *request, batchSize int64) (result, error) {
	cs := c.stream
	wait := defaultMaxAwait
	if !r.deadline.IsZero() {
		wait = time.Until(r.deadline)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		notify := s.engine.OplogNotify()
		batch, err := s.streamBatch(cs, batchSize)
		if err != nil {
			return result{}, err // the cursor is dropped: not put back
		}
		if len(batch) > 0 || cs.invalidated {
			return s.streamReply(c, batch), nil
		}
		select {
		case <-notify:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		case <-s.closing:
		}
		return s.streamReply(c, batch), nil
	}
}

func (s *Server) streamReply(c *cursor, batch bson.A) result {
	id := c.id
	if c.stream.invalidated {
		id = 0
	} else {
		s.cursors.put(c)
	}
	return result{fields: cursorReply(id, c.ns, "nextBatch", batch,
		bson.E{Key: "postBatchResumeToken", Value: c.stream.pbrt()})}
}

// streamBatch reads the oplog after the stream's position and returns up to batchSize
// (0 = unlimited, within the reply size limit) events, advancing the position past every
// entry it consumed, matching or not.
func (s *Server) streamBatch(cs *changeStream, batchSize int64) (bson.A, error) {
	if err := s.checkHistory(cs.after); err != nil {
		return nil, err
	}
	batch := bson.A{}
	size := 0
	full := func() bool {
		return (batchSize > 0 && int64(len(batch)) >= batchSize) || size >= maxBatchBytes
	}
	// The batch's events are encoded into chunks of buf: one allocation for many events. A
	// chunk is never written again once an event is in it (the reply holds the events).
	var buf []byte
	reserve := func(n int) {
		if cap(buf)-len(buf) < n {
			buf = make([]byte, 0, max(eventChunk, 2*n))
		}
	}
	add := func(raw []byte) {
		batch = append(batch, bson.Raw(raw[:len(raw):len(raw)]))
		size += len(raw)
	}
	emit := func(ev bson.D, ts storage.OpTime, kind byte) error {
		cs.setPBRT(ts, kind)
		out, err := cs.apply(ev)
		if err != nil || out == nil {
			return err
		}
		reserve(bsonval.DocSize(out))
		start := len(buf)
		enc, err := bsonval.AppendDocument(buf, out)
		if err != nil {
			return mongoerr.New(mongoerr.InternalError, "encode change event: %v", err)
		}
		buf = enc
		add(buf[start:])
		return nil
	}
	if cs.pendingInvalidate != nil {
		e := cs.pendingInvalidate
		cs.pendingInvalidate = nil
		cs.invalidated = true
		return batch, emit(invalidateEvent(e), e.TS, tokenInvalidate)
	}
	for !full() {
		raws := s.engine.OplogAfterRaw(cs.after, 256)
		if len(raws) == 0 {
			break
		}
		for _, re := range raws {
			if full() {
				break
			}
			cs.after = re.TS
			cs.setPBRT(re.TS, tokenHighWater)
			if cs.raw {
				reserve(2*len(re.Bytes()) + 256)
				start := len(buf)
				out, outcome := s.rawDocEvent(buf, cs, re)
				switch outcome {
				case rawSkipped:
					continue
				case rawFiltered:
					cs.setPBRT(re.TS, tokenEvent)
					continue
				case rawShown:
					cs.setPBRT(re.TS, tokenEvent)
					buf = out
					add(buf[start:])
					continue
				}
				// rawFallback: the decoded path below.
			}
			if cs.probe != nil && !s.probeEvent(cs, re) {
				// As an event the stages filtered out (see emit).
				cs.setPBRT(re.TS, tokenEvent)
				continue
			}
			ent, err := re.Decode()
			if err != nil {
				continue // entries are encoded by this process; a failure is a bug, not input
			}
			e := &ent
			if !cs.inScope(e) {
				continue
			}
			ev, ok, err := s.eventFor(cs, e)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if err := emit(ev, e.TS, tokenEvent); err != nil {
				return nil, err
			}
			if cs.invalidatedBy(e) {
				cs.invalidated = true
				return batch, emit(invalidateEvent(e), e.TS, tokenInvalidate)
			}
		}
	}
	return batch, nil
}

// eventChunk is the size of the chunks a batch's events are encoded into.
const eventChunk = 64 << 10

// apply runs the stages after $changeStream on one event; nil means filtered out.
func (cs *changeStream) apply(ev bson.D) (bson.D, error) {
	if cs.post == nil {
		return ev, nil
	}
	out, err := cs.post.Run(func(yield func(bson.D) bool) { yield(ev) })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	id, _ := bsonval.Get(out[0], "_id")
	want, _ := bsonval.Get(ev, "_id")
	if bsonval.Compare(id, want) != 0 {
		return nil, &mongoerr.Error{
			Code:   mongoerr.ChangeStreamFatalError,
			Msg:    "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.",
			Labels: []string{"NonResumableChangeStreamError"},
		}
	}
	return out[0], nil
}
