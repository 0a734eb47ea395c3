package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// termCounterID is the _id of the document whose last field is the last term handed out.
// Terms are global (not per lease) so a term taken after another, of any partition, is
// larger: writes keep being fenced correctly when the partitioning changes.
const termCounterID = "term-counter"

// ErrFenced is wrapped by the error of a write, a checkpoint save or a Check of a holder
// whose term is older than the one stored: another instance has taken over.
var ErrFenced = errors.New("fenced by a newer lease term")

// Lease is one held lease.
type Lease struct {
	// ID is the lease's id (a watcher partition's).
	ID string
	// Term is the fencing term it was acquired with.
	Term int64
	// Owner is the instance id holding it.
	Owner string
	// Expires is the expiry this instance can rely on: the expiry it wrote, computed from
	// the time it sent the write.
	Expires time.Time
}

// Leases acquires, renews and releases lease documents (store.LeasesCollection) for one
// owner.
type Leases struct {
	coll  *mongo.Collection // w:majority, j:true
	owner string
	ttl   time.Duration
	now   func() time.Time
}

// NewLeases returns the leases of owner in db, each lasting ttl without renewal; now is the
// clock (nil: time.Now).
func NewLeases(db *mongo.Database, owner string, ttl time.Duration, now func() time.Time) *Leases {
	if now == nil {
		now = time.Now
	}
	return &Leases{coll: db.Collection(store.LeasesCollection, store.Durable()), owner: owner, ttl: ttl, now: now}
}

// leaseDoc is the stored lease.
type leaseDoc struct {
	Owner     string    `bson:"owner"`
	Term      int64     `bson:"term"`
	ExpiresAt time.Time `bson:"expires_at"`
}

// Acquire takes the lease id when it is absent, expired or already this owner's, with a new
// term; ok is false when another owner holds it (or won the race for it).
func (l *Leases) Acquire(ctx context.Context, id string) (Lease, bool, error) {
	now := l.now()
	var cur leaseDoc
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&cur)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return Lease{}, false, fmt.Errorf("read lease %s: %w", id, err)
	case cur.Owner != l.owner && !cur.ExpiresAt.Before(now):
		return Lease{}, false, nil // held: no term is spent on a poll
	}
	term, err := l.nextTerm(ctx)
	if err != nil {
		return Lease{}, false, err
	}
	expires := now.Add(l.ttl)
	var got leaseDoc
	err = l.coll.FindOneAndUpdate(ctx,
		bson.D{
			{Key: "_id", Value: id},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: store.FieldExpiresAt, Value: bson.D{{Key: "$lt", Value: now}}}},
				bson.D{{Key: store.FieldOwner, Value: l.owner}},
			}},
			{Key: store.FieldTerm, Value: bson.D{{Key: "$lt", Value: term}}},
		},
		bson.D{{Key: "$set", Value: bson.D{
			{Key: store.FieldOwner, Value: l.owner},
			{Key: store.FieldTerm, Value: term},
			{Key: store.FieldExpiresAt, Value: expires},
			{Key: store.FieldAcquiredAt, Value: now},
		}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&got)
	if mongo.IsDuplicateKeyError(err) {
		return Lease{}, false, nil // someone else took it between the read and the update
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", id, err)
	}
	if got.Owner != l.owner || got.Term != term {
		return Lease{}, false, nil
	}
	return Lease{ID: id, Term: term, Owner: l.owner, Expires: expires}, true, nil
}

// nextTerm hands out a term larger than every term handed out before.
func (l *Leases) nextTerm(ctx context.Context) (int64, error) {
	var c struct {
		Last int64 `bson:"last"`
	}
	err := l.coll.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: termCounterID}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: store.FieldLast, Value: int64(1)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&c)
	if err != nil {
		return 0, fmt.Errorf("next lease term: %w", err)
	}
	return c.Last, nil
}

// Renew extends a held lease by the TTL; ok is false when it is no longer held (another
// owner took it over, with a newer term).
func (l *Leases) Renew(ctx context.Context, ls Lease) (Lease, bool, error) {
	expires := l.now().Add(l.ttl)
	err := l.coll.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: ls.ID}, {Key: store.FieldOwner, Value: l.owner}, {Key: store.FieldTerm, Value: ls.Term}},
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldExpiresAt, Value: expires}}}},
	).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return ls, false, nil
	}
	if err != nil {
		return ls, true, fmt.Errorf("renew lease %s: %w", ls.ID, err)
	}
	ls.Expires = expires
	return ls, true, nil
}

// Release expires a held lease at once, so a standby takes over without waiting for the TTL.
func (l *Leases) Release(ctx context.Context, ls Lease) error {
	_, err := l.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: ls.ID}, {Key: store.FieldOwner, Value: l.owner}, {Key: store.FieldTerm, Value: ls.Term}},
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldExpiresAt, Value: time.Unix(0, 0).UTC()}}}},
	)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", ls.ID, err)
	}
	return nil
}

// Check returns an error wrapping ErrFenced when ls is no longer the stored lease (a newer
// term exists).
func (l *Leases) Check(ctx context.Context, ls Lease) error {
	var cur leaseDoc
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ls.ID}}).Decode(&cur)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("lease %s: %w (lease document gone)", ls.ID, ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", ls.ID, err)
	}
	if cur.Owner != l.owner || cur.Term != ls.Term {
		return fmt.Errorf("lease %s term %d: %w (%d, %s)", ls.ID, ls.Term, ErrFenced, cur.Term, cur.Owner)
	}
	return nil
}

// TermGuard is the filter condition of a write by a holder of term: the stored term is not
// newer (or absent). As an extra, non-equality field it makes a refused upsert fail with
// E11000, so a refusal shows up as a conflict at its own index.
func TermGuard(term int64) bson.E {
	return bson.E{Key: store.FieldTerm, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: term}}}}}
}

// WithTerm returns update ({$set: {...}}) with term added to its $set.
func WithTerm(update bson.D, term int64) bson.D {
	out := make(bson.D, 0, len(update))
	for _, op := range update {
		if set, ok := op.Value.(bson.D); ok && op.Key == "$set" {
			op.Value = append(slices.Clip(set), bson.E{Key: store.FieldTerm, Value: term})
		}
		out = append(out, op)
	}
	return out
}

// DefaultOwner is host-pid-random, unique per call: the instance id of an instance started
// without one.
func DefaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
