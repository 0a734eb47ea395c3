package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// DuplicateInstanceError means another live process runs with this instance id.
type DuplicateInstanceError struct {
	// ID is the instance id; Host and PID are the other process's.
	ID, Host string
	PID      int
}

// Error names the other process and the fix.
func (e *DuplicateInstanceError) Error() string {
	return fmt.Sprintf("instance id %q is in use by a live process (host %s, pid %d): give every instance its own --instance-id",
		e.ID, e.Host, e.PID)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *DuplicateInstanceError) Permanent() bool { return true }

// TakenOverError means another process claimed this instance's id while it ran: two processes
// share it.
type TakenOverError struct {
	// ID is the instance id; Host and PID are the other process's.
	ID, Host string
	PID      int
}

// Error names the other process and the fix.
func (e *TakenOverError) Error() string {
	return fmt.Sprintf("instance id %q was taken over by another process (host %s, pid %d): give every instance its own --instance-id",
		e.ID, e.Host, e.PID)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *TakenOverError) Permanent() bool { return true }

// instanceDoc is the stored instance document.
type instanceDoc struct {
	Incarnation string    `bson:"incarnation"`
	Host        string    `bson:"host"`
	PID         int       `bson:"pid"`
	StartedAt   time.Time `bson:"started_at"`
	Beat        int64     `bson:"beat"`
	Stopped     bool      `bson:"stopped"`
}

// Knobs are the test hooks of the package; production leaves them zero.
type Knobs struct {
	// Host and PID, when set, replace this process's in the instance document (a test
	// stands for another process).
	Host string
	PID  int
	// Alive replaces the check whether a process of this host runs pid.
	Alive func(pid int) bool
	// BeforeHeartbeat is called before each heartbeat (to freeze an instance).
	BeforeHeartbeat func()
}

// Instance holds one instance id for this process (store.InstancesCollection): it claims it
// at start, proves it alive with a heartbeat, and marks it stopped at shutdown.
type Instance struct {
	coll        *mongo.Collection // w:majority, j:true
	id          string
	incarnation string
	host        string
	pid         int
	beat        time.Duration
	// alive reports whether a process of this host runs pid.
	alive func(pid int) bool
	now   func() time.Time
	// pause, a test knob, is called before each heartbeat.
	pause func()
}

// NewInstance returns the instance id for this process in db, beating every beat; now is the
// clock (nil: time.Now), knobs the test hooks (nil in production).
func NewInstance(db *mongo.Database, id string, beat time.Duration, now func() time.Time, knobs *Knobs) *Instance {
	if now == nil {
		now = time.Now
	}
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	in := &Instance{
		coll: db.Collection(store.InstancesCollection, store.Durable()), id: id, incarnation: hex.EncodeToString(b[:]),
		host: host, pid: os.Getpid(), beat: beat, alive: processAlive, now: now,
	}
	if knobs != nil {
		if knobs.Host != "" {
			in.host = knobs.Host
		}
		if knobs.PID != 0 {
			in.pid = knobs.PID
		}
		if knobs.Alive != nil {
			in.alive = knobs.Alive
		}
		in.pause = knobs.BeforeHeartbeat
	}
	return in
}

// ID is the instance id; Incarnation identifies this process's claim of it.
func (in *Instance) ID() string { return in.id }

// Incarnation identifies this process's claim of the id.
func (in *Instance) Incarnation() string { return in.incarnation }

// Claim takes the id. It does so at once when no live process can hold it: no document, a
// stopped one, or one of a process of this host that is gone (a restart after a crash).
// Otherwise it watches the heartbeat for three beats: a moving heartbeat means a live
// process holds the id (DuplicateInstanceError); a still one, a dead process elsewhere.
func (in *Instance) Claim(ctx context.Context) error {
	for {
		cur, found, err := in.read(ctx)
		if err != nil {
			return err
		}
		if found && cur.Incarnation != in.incarnation && !cur.Stopped && !in.gone(cur) {
			if err := in.watch(ctx, cur); err != nil {
				return err
			}
		}
		ok, err := in.take(ctx, cur, found)
		if err != nil || ok {
			return err
		}
		// Another process changed the document meanwhile: look again.
	}
}

// gone reports whether the holder in doc was a process of this host that no longer runs (or
// had this process's pid).
func (in *Instance) gone(doc instanceDoc) bool {
	return doc.Host == in.host && (doc.PID == in.pid || !in.alive(doc.PID))
}

// watch polls the holder's heartbeat for three beats.
func (in *Instance) watch(ctx context.Context, cur instanceDoc) error {
	deadline := time.Now().Add(3 * in.beat)
	for time.Now().Before(deadline) {
		t := time.NewTimer(in.beat / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		next, found, err := in.read(ctx)
		if err != nil {
			return err
		}
		if !found || next.Stopped {
			return nil
		}
		if next.Incarnation != cur.Incarnation || next.Beat != cur.Beat {
			return &DuplicateInstanceError{ID: in.id, Host: next.Host, PID: next.PID}
		}
	}
	return nil
}

func (in *Instance) read(ctx context.Context) (instanceDoc, bool, error) {
	var d instanceDoc
	err := in.coll.FindOne(ctx, bson.D{{Key: "_id", Value: in.id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("read instance %s: %w", in.id, err)
	}
	return d, true, nil
}

// take writes this process into the document, provided it is still cur (absent: !found).
func (in *Instance) take(ctx context.Context, cur instanceDoc, found bool) (bool, error) {
	mine := bson.D{
		{Key: store.FieldIncarnation, Value: in.incarnation}, {Key: store.FieldHost, Value: in.host}, {Key: store.FieldPID, Value: in.pid},
		{Key: store.FieldStartedAt, Value: in.now()}, {Key: store.FieldBeat, Value: int64(0)}, {Key: store.FieldBeatAt, Value: in.now()},
		{Key: store.FieldStopped, Value: false},
	}
	if !found {
		_, err := in.coll.InsertOne(ctx, append(bson.D{{Key: "_id", Value: in.id}}, mine...))
		if mongo.IsDuplicateKeyError(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("claim instance %s: %w", in.id, err)
		}
		return true, nil
	}
	res, err := in.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: in.id}, {Key: store.FieldIncarnation, Value: cur.Incarnation}, {Key: store.FieldBeat, Value: cur.Beat}},
		bson.D{{Key: "$set", Value: mine}})
	if err != nil {
		return false, fmt.Errorf("claim instance %s: %w", in.id, err)
	}
	return res.MatchedCount == 1, nil
}

// Heartbeat advances the beat; a *TakenOverError means another process claimed the id.
func (in *Instance) Heartbeat(ctx context.Context) error {
	res, err := in.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: in.id}, {Key: store.FieldIncarnation, Value: in.incarnation}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: store.FieldBeat, Value: int64(1)}}}, {Key: "$set", Value: bson.D{{Key: store.FieldBeatAt, Value: in.now()}}}})
	if err != nil {
		return fmt.Errorf("instance %s heartbeat: %w", in.id, err)
	}
	if res.MatchedCount == 0 {
		other, found, err := in.read(ctx)
		if err != nil {
			return err
		}
		if !found {
			// The document expired (the instances TTL index: no heartbeat reached the store
			// for a day) or was deleted: nobody holds the id, take it again.
			if ok, err := in.take(ctx, instanceDoc{}, false); err != nil || ok {
				return err
			}
			other, _, _ = in.read(ctx)
		}
		return &TakenOverError{ID: in.id, Host: other.Host, PID: other.PID}
	}
	return nil
}

// Run beats every in.beat until ctx is done (nil) or the id is taken over. Store errors only
// delay the next beat.
func (in *Instance) Run(ctx context.Context, log *zap.Logger) error {
	t := time.NewTicker(in.beat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if in.pause != nil {
			in.pause()
		}
		err := in.Heartbeat(ctx)
		var over *TakenOverError
		switch {
		case errors.As(err, &over):
			return err
		case err != nil && ctx.Err() == nil:
			log.Debug("instance heartbeat failed", zap.Error(err))
		}
	}
}

// Stop marks the id free for the next process, by the deadline even after ctx ends.
func (in *Instance) Stop(ctx context.Context, by time.Time, log *zap.Logger) {
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	_, err := in.coll.UpdateOne(sctx,
		bson.D{{Key: "_id", Value: in.id}, {Key: store.FieldIncarnation, Value: in.incarnation}},
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldStopped, Value: true}}}})
	if err != nil {
		log.Warn("could not mark the instance stopped; the next start with its id waits three heartbeats", zap.Error(err))
	}
}

// CountLive counts the instances of db that beat at or after since and are not stopped
// (their heartbeat times are their own clocks: give since a margin of a few beats).
func CountLive(ctx context.Context, db *mongo.Database, since time.Time) (int, error) {
	cur, err := db.Collection(store.InstancesCollection).Find(ctx, bson.D{
		{Key: store.FieldStopped, Value: bson.D{{Key: "$ne", Value: true}}},
		{Key: store.FieldBeatAt, Value: bson.D{{Key: "$gte", Value: since}}},
	}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("count live instances: %w", err)
	}
	var ids []bson.Raw
	if err := cur.All(ctx, &ids); err != nil {
		return 0, fmt.Errorf("count live instances: %w", err)
	}
	return len(ids), nil
}
