package watcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// LeasesCollection holds one lease document per partition, {_id: lease id, owner, term,
// expires_at, acquired_at}, and the term counter {_id: "term-counter", last}.
const LeasesCollection = "leases"

// termCounterID is the _id of the document whose last field is the last term handed out.
// Terms are global (not per lease) so a term taken after another, of any partition, is
// larger: parents keep being fenced correctly when the partitioning changes.
const termCounterID = "term-counter"

// errFenced is returned by a write or checkpoint save of a leader whose term is older than
// the one stored: another instance has taken over the partition.
var errFenced = errors.New("watcher: fenced by a newer lease term")

// lease is one held lease.
type lease struct {
	id    string
	term  int64
	owner string
	// expires is the expiry this instance can rely on: the expiry it wrote, computed from
	// the time it sent the write.
	expires time.Time
}

// leases acquires, renews and releases lease documents for one owner.
type leases struct {
	coll  *mongo.Collection // w:majority, j:true
	owner string
	ttl   time.Duration
	now   func() time.Time
}

// leaseDoc is the stored lease.
type leaseDoc struct {
	Owner     string    `bson:"owner"`
	Term      int64     `bson:"term"`
	ExpiresAt time.Time `bson:"expires_at"`
}

// acquire takes the lease id when it is absent, expired or already this owner's, with a new
// term; ok is false when another owner holds it (or won the race for it).
func (l leases) acquire(ctx context.Context, id string) (lease, bool, error) {
	now := l.now()
	var cur leaseDoc
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&cur)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return lease{}, false, fmt.Errorf("read lease %s: %w", id, err)
	case cur.Owner != l.owner && !cur.ExpiresAt.Before(now):
		return lease{}, false, nil // held: no term is spent on a poll
	}
	term, err := l.nextTerm(ctx)
	if err != nil {
		return lease{}, false, err
	}
	expires := now.Add(l.ttl)
	var got leaseDoc
	err = l.coll.FindOneAndUpdate(ctx,
		bson.D{
			{Key: "_id", Value: id},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "expires_at", Value: bson.D{{Key: "$lt", Value: now}}}},
				bson.D{{Key: "owner", Value: l.owner}},
			}},
			{Key: "term", Value: bson.D{{Key: "$lt", Value: term}}},
		},
		bson.D{{Key: "$set", Value: bson.D{
			{Key: "owner", Value: l.owner},
			{Key: "term", Value: term},
			{Key: "expires_at", Value: expires},
			{Key: "acquired_at", Value: now},
		}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&got)
	if mongo.IsDuplicateKeyError(err) {
		return lease{}, false, nil // someone else took it between the read and the update
	}
	if err != nil {
		return lease{}, false, fmt.Errorf("acquire lease %s: %w", id, err)
	}
	if got.Owner != l.owner || got.Term != term {
		return lease{}, false, nil
	}
	return lease{id: id, term: term, owner: l.owner, expires: expires}, true, nil
}

// nextTerm hands out a term larger than every term handed out before.
func (l leases) nextTerm(ctx context.Context) (int64, error) {
	var c struct {
		Last int64 `bson:"last"`
	}
	err := l.coll.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: termCounterID}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "last", Value: int64(1)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&c)
	if err != nil {
		return 0, fmt.Errorf("next lease term: %w", err)
	}
	return c.Last, nil
}

// renew extends a held lease by the TTL; ok is false when it is no longer held (another
// owner took it over, with a newer term).
func (l leases) renew(ctx context.Context, ls lease) (lease, bool, error) {
	now := l.now()
	expires := now.Add(l.ttl)
	err := l.coll.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: ls.id}, {Key: "owner", Value: l.owner}, {Key: "term", Value: ls.term}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: expires}}}},
	).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return ls, false, nil
	}
	if err != nil {
		return ls, true, fmt.Errorf("renew lease %s: %w", ls.id, err)
	}
	ls.expires = expires
	return ls, true, nil
}

// release expires a held lease at once, so a standby takes over without waiting for the TTL.
func (l leases) release(ctx context.Context, ls lease) error {
	_, err := l.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: ls.id}, {Key: "owner", Value: l.owner}, {Key: "term", Value: ls.term}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: time.Unix(0, 0).UTC()}}}},
	)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", ls.id, err)
	}
	return nil
}

// check returns errFenced when ls is no longer the stored lease (a newer term exists).
func (l leases) check(ctx context.Context, ls lease) error {
	var cur leaseDoc
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: ls.id}}).Decode(&cur)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return fmt.Errorf("lease %s: %w (lease document gone)", ls.id, errFenced)
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", ls.id, err)
	}
	if cur.Owner != l.owner || cur.Term != ls.term {
		return fmt.Errorf("lease %s term %d: %w (%d, %s)", ls.id, ls.term, errFenced, cur.Term, cur.Owner)
	}
	return nil
}
