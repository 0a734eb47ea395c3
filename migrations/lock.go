package migrations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

const (
	// lockID is the _id of the single lock document.
	lockID = "lock"
	// DefaultLockTTL is how long a lock lives without renewal: an instance that crashed while
	// migrating blocks others for at most this long.
	DefaultLockTTL = 30 * time.Second
	// DefaultLockWait is how long Up waits for a lock held by another instance.
	DefaultLockWait = 2 * time.Minute
	// defaultLockPoll is the interval between attempts to take a held lock.
	defaultLockPoll = 500 * time.Millisecond
	// releaseTimeout bounds the release of the lock after ctx is done.
	releaseTimeout = 5 * time.Second
)

// ErrLocked is wrapped by every *LockHeldError.
var ErrLocked = errors.New("migration lock held")

// ErrLockLost means the lock expired and another instance took it while this one was migrating
// (its renewals failed for longer than the TTL); the step in progress was cancelled.
var ErrLockLost = errors.New("migration lock lost")

// LockHeldError means another instance holds the migration lock and did not release it within
// the wait.
type LockHeldError struct {
	// Owner is the holder's owner id (host, pid and a random suffix).
	Owner string
	// ExpiresAt is when the lock expires unless its holder renews it.
	ExpiresAt time.Time
	// Waited is how long Up waited for it.
	Waited time.Duration
}

// Error names the owner and tells the operator what to do.
func (e *LockHeldError) Error() string {
	return fmt.Sprintf("migration lock held by %q until %s (waited %s): another instance is migrating; "+
		"retry when it finishes, or if that instance is dead, after the lock expires",
		e.Owner, e.ExpiresAt.UTC().Format(time.RFC3339), e.Waited.Round(time.Millisecond))
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockHeldError) Unwrap() error { return ErrLocked }

// lockDoc is the stored lock document.
type lockDoc struct {
	ID         string    `bson:"_id"`
	Owner      string    `bson:"owner"`
	AcquiredAt time.Time `bson:"acquired_at"`
	ExpiresAt  time.Time `bson:"expires_at"`
}

// tryLock makes one attempt to take the lock. It returns the current holder when the lock is
// held by someone else (a nil error and ok false).
func (m *Migrator) tryLock(ctx context.Context) (held lockDoc, ok bool, err error) {
	coll := m.db.Collection(store.LockCollection)
	now := m.now()
	filter := bson.D{{Key: "_id", Value: lockID}, {Key: "expires_at", Value: bson.D{{Key: "$lt", Value: now}}}}
	update := bson.D{{Key: "$set", Value: bson.D{
		{Key: "owner", Value: m.owner},
		{Key: "acquired_at", Value: now},
		{Key: "expires_at", Value: now.Add(m.ttl)},
	}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	err = coll.FindOneAndUpdate(ctx, filter, update, opts).Err()
	switch {
	case err == nil:
		return lockDoc{}, true, nil
	case mongo.IsDuplicateKeyError(err):
		// A live lock exists: read who holds it. It may vanish in between; the caller retries.
		var d lockDoc
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: lockID}}).Decode(&d); err != nil &&
			!errors.Is(err, mongo.ErrNoDocuments) {
			return lockDoc{}, false, fmt.Errorf("read migration lock: %w", err)
		}
		return d, false, nil
	default:
		return lockDoc{}, false, fmt.Errorf("take migration lock: %w", err)
	}
}

// acquire takes the lock, polling while another instance holds it, for at most wait (wait < 0:
// one attempt).
func (m *Migrator) acquire(ctx context.Context, wait time.Duration) error {
	start := time.Now()
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	logged := false
	for {
		held, ok, err := m.tryLock(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		heldErr := &LockHeldError{Owner: held.Owner, ExpiresAt: held.ExpiresAt, Waited: time.Since(start)}
		if wait < 0 {
			return heldErr
		}
		if !logged {
			m.log.Info("waiting for migration lock", zap.String("owner", held.Owner),
				zap.Time("expires_at", held.ExpiresAt), zap.Duration("max_wait", wait))
			logged = true
		}
		poll := time.NewTimer(m.poll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return fmt.Errorf("wait for migration lock: %w", ctx.Err())
		case <-deadline:
			poll.Stop()
			heldErr.Waited = time.Since(start)
			return heldErr
		case <-poll.C:
		}
	}
}

// renew pushes the expiry of our lock forward. It returns ErrLockLost when the lock is no
// longer ours.
func (m *Migrator) renew(ctx context.Context) error {
	res, err := m.db.Collection(store.LockCollection).UpdateOne(ctx,
		bson.D{{Key: "_id", Value: lockID}, {Key: "owner", Value: m.owner}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires_at", Value: m.now().Add(m.ttl)}}}})
	if err != nil {
		return fmt.Errorf("renew migration lock: %w", err)
	}
	if res.MatchedCount == 0 {
		return ErrLockLost
	}
	return nil
}

// keepLock renews the lock every ttl/3 until ctx is done. When the lock is lost, or renewals
// keep failing until the lock would have expired, it calls lost and returns.
func (m *Migrator) keepLock(ctx context.Context, lost func(error)) {
	every := m.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.renew(ctx)
		switch {
		case err == nil:
			lastOK = time.Now()
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrLockLost):
			lost(err)
			return
		default:
			m.log.Warn("renew migration lock", zap.Error(err))
			if time.Since(lastOK) >= m.ttl {
				lost(fmt.Errorf("%w: renewals failed for %s: %w", ErrLockLost, m.ttl, err))
				return
			}
		}
	}
}

// release deletes our lock, within a bounded time even when ctx is already done.
func (m *Migrator) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, err := m.db.Collection(store.LockCollection).DeleteOne(ctx,
		bson.D{{Key: "_id", Value: lockID}, {Key: "owner", Value: m.owner}})
	if err != nil {
		return fmt.Errorf("release migration lock: %w", err)
	}
	return nil
}
