package migrations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/sourcegraph/conc"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// Migrator applies the steps of Steps to one database.
type Migrator struct {
	db    *mongo.Database
	log   *zap.Logger
	steps []Step
	owner string
	ttl   time.Duration
	poll  time.Duration
	now   func() time.Time
}

// New returns a Migrator for db with the steps of Steps, the default lock TTL and an owner id
// made of the host name, the process id and a random suffix.
func New(db *mongo.Database, log *zap.Logger) *Migrator {
	if log == nil {
		log = zap.NewNop()
	}
	return &Migrator{
		db:    db,
		log:   log,
		steps: Steps(),
		owner: newOwnerID(),
		ttl:   DefaultLockTTL,
		poll:  defaultLockPoll,
		now:   func() time.Time { return time.Now().UTC() },
	}
}

// newOwnerID identifies this instance in the lock document.
func newOwnerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner is the id this Migrator writes into the lock document.
func (m *Migrator) Owner() string { return m.owner }

// UpOptions tune Up.
type UpOptions struct {
	// DryRun reports what Up would do and changes nothing; it takes no lock.
	DryRun bool
	// LockWait bounds the wait for a lock held by another instance: 0 means DefaultLockWait,
	// a negative value means do not wait (fail at once with a *LockHeldError).
	LockWait time.Duration
}

// StepStatus is the state of one step.
type StepStatus struct {
	// Version is the step's version.
	Version int
	// Name is the step's name (the recorded name for steps this binary does not know).
	Name string
	// Applied tells whether the step is recorded as applied.
	Applied bool
	// AppliedAt is when it was applied (zero if not).
	AppliedAt time.Time
	// Unknown marks a step recorded in the database that this binary does not know (applied
	// by a newer rollup).
	Unknown bool
}

// appliedDoc is one document of the migrations collection.
type appliedDoc struct {
	Version   int       `bson:"_id"`
	Name      string    `bson:"name"`
	AppliedAt time.Time `bson:"applied_at"`
}

// applied reads the recorded steps by version.
func (m *Migrator) applied(ctx context.Context) (map[int]appliedDoc, error) {
	cur, err := m.db.Collection(store.MigrationsCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var docs []appliedDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	out := make(map[int]appliedDoc, len(docs))
	for _, d := range docs {
		out[d.Version] = d
	}
	return out, nil
}

// Status lists every known step and whether it is applied, by version, followed by any
// recorded step this binary does not know.
func (m *Migrator) Status(ctx context.Context) ([]StepStatus, error) {
	done, err := m.applied(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]StepStatus, 0, len(m.steps))
	known := make(map[int]bool, len(m.steps))
	for _, s := range m.steps {
		known[s.Version] = true
		st := StepStatus{Version: s.Version, Name: s.Name}
		if d, ok := done[s.Version]; ok {
			st.Applied, st.AppliedAt = true, d.AppliedAt
		}
		out = append(out, st)
	}
	var unknown []StepStatus
	for v, d := range done {
		if !known[v] {
			unknown = append(unknown, StepStatus{Version: v, Name: d.Name, Applied: true, AppliedAt: d.AppliedAt, Unknown: true})
		}
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Version < unknown[j].Version })
	return append(out, unknown...), nil
}

// Pending is the number of known steps not yet applied.
func (m *Migrator) Pending(ctx context.Context) (int, error) {
	done, err := m.applied(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range m.steps {
		if _, ok := done[s.Version]; !ok {
			n++
		}
	}
	return n, nil
}

// Up applies the pending steps in version order under the migration lock, recording each
// after it succeeds. It stops at the first failing step (earlier steps stay applied; a rerun
// continues from the failed one). With opts.DryRun it runs each pending step's checks and
// reports what it would do, changing nothing. A second Up while another instance holds the
// lock waits (see UpOptions.LockWait) and then finds the steps applied.
func (m *Migrator) Up(ctx context.Context, opts UpOptions) (Report, error) {
	r := Report{DryRun: opts.DryRun}
	if err := validateSteps(m.steps); err != nil {
		return r, err
	}
	if opts.DryRun {
		return r, m.runPending(ctx, &r)
	}
	wait := opts.LockWait
	if wait == 0 {
		wait = DefaultLockWait
	}
	if err := m.acquire(ctx, wait); err != nil {
		return r, err
	}
	m.log.Debug("took migration lock", zap.String("owner", m.owner))

	stepCtx, cancel := context.WithCancelCause(ctx)
	var renewal conc.WaitGroup
	renewal.Go(func() {
		// keepLock returns only once stepCtx is done; this cancel matters when it panics:
		// the steps stop (the lock is no longer renewed), then Wait raises the panic.
		defer cancel(errRenewalPanicked)
		m.keepLock(stepCtx, cancel)
	})
	err := m.runPending(stepCtx, &r)
	cancel(nil)
	renewal.Wait()
	if cause := context.Cause(stepCtx); errors.Is(cause, ErrLockLost) {
		err = cause
	}
	if relErr := m.release(ctx); relErr != nil {
		if err == nil {
			return r, relErr
		}
		m.log.Warn("release migration lock", zap.Error(relErr))
	}
	return r, err
}

// errRenewalPanicked ends the steps when the lock's renewal panicked.
var errRenewalPanicked = fmt.Errorf("%w: its renewal panicked", ErrLockLost)

// StepDrift is an index of an applied step that is not as the step built it.
type StepDrift struct {
	// Version and Name are the step's.
	Version int
	Name    string
	// Drift says what is wrong with the index.
	Drift store.Drift
}

// String says what drifted and what repairs it, for an operator.
func (d StepDrift) String() string {
	return fmt.Sprintf("%s; step %d built it: run `rollup migrate up` to repair it", d.Drift, d.Version)
}

// Drift lists the indexes of applied steps that are missing, or exist with another
// definition (schema drift: someone dropped or changed them). Up repairs them.
func (m *Migrator) Drift(ctx context.Context) ([]StepDrift, error) {
	done, err := m.applied(ctx)
	if err != nil {
		return nil, err
	}
	return m.drift(ctx, done)
}

// drift is Drift given the applied steps.
func (m *Migrator) drift(ctx context.Context, done map[int]appliedDoc) ([]StepDrift, error) {
	all, err := store.CheckIndexes(ctx, m.db, Catalog())
	if err != nil {
		return nil, err
	}
	var out []StepDrift
	for _, d := range all {
		for _, s := range m.steps {
			if _, ok := done[s.Version]; ok && slices.Contains(s.Indexes, d.Index.Collection+"."+d.Index.Name) {
				out = append(out, StepDrift{Version: s.Version, Name: s.Name, Drift: d})
			}
		}
	}
	return out, nil
}

// repairDrift runs every applied step again whose indexes drifted (see Drift): each step
// builds its indexes through ensureIndex, so the run creates a missing index and replaces one
// defined differently (step 1 removing duplicate counts first).
func (m *Migrator) repairDrift(ctx context.Context, done map[int]appliedDoc, r *Report) error {
	drift, err := m.drift(ctx, done)
	if err != nil {
		return err
	}
	for _, s := range m.steps {
		var ds []store.Drift
		for _, d := range drift {
			if d.Version == s.Version {
				ds = append(ds, d.Drift)
			}
		}
		if len(ds) == 0 {
			continue
		}
		start := time.Now()
		m.log.Warn("schema drift: repairing", zap.Int("version", s.Version), zap.String("name", s.Name),
			zap.Stringer("drift", ds[0]), zap.Bool("dry_run", r.DryRun))
		if err := s.Up(ctx, m.db, r); err != nil {
			return fmt.Errorf("repair migration %d %s: %w", s.Version, s.Name, err)
		}
		res := StepResult{Version: s.Version, Name: s.Name}
		if !r.DryRun {
			res.Took = time.Since(start)
		}
		r.Repaired = append(r.Repaired, Repair{Step: res, Drift: ds})
	}
	return nil
}

// runPending repairs the drift of the steps applied before (see Drift), applies (or with
// r.DryRun, checks) every pending step in order, then runs the sharding setup on a sharded
// cluster (see sharding.go): the indexes the shard key relies on exist by then.
func (m *Migrator) runPending(ctx context.Context, r *Report) error {
	done, err := m.applied(ctx)
	if err != nil {
		return err
	}
	if err := m.repairDrift(ctx, done, r); err != nil {
		return err
	}
	for _, s := range m.steps {
		if _, ok := done[s.Version]; ok {
			continue
		}
		start := time.Now()
		m.log.Info("migration step", zap.Int("version", s.Version), zap.String("name", s.Name),
			zap.Bool("dry_run", r.DryRun))
		if err := s.Up(ctx, m.db, r); err != nil {
			return fmt.Errorf("migration %d %s: %w", s.Version, s.Name, err)
		}
		res := StepResult{Version: s.Version, Name: s.Name}
		if !r.DryRun {
			res.Took = time.Since(start)
			rec := appliedDoc{Version: s.Version, Name: s.Name, AppliedAt: m.now()}
			if _, err := m.db.Collection(store.MigrationsCollection).InsertOne(ctx, rec); err != nil {
				return fmt.Errorf("record migration %d %s: %w", s.Version, s.Name, err)
			}
		}
		r.Applied = append(r.Applied, res)
	}
	return m.shard(ctx, r)
}

// validateSteps checks that versions start at 1 and increase by one, and names are set.
func validateSteps(steps []Step) error {
	for i, s := range steps {
		if s.Version != i+1 {
			return stepsError(fmt.Sprintf("migration steps: step %d has version %d, want %d", i, s.Version, i+1))
		}
		if s.Name == "" || s.Up == nil {
			return stepsError(fmt.Sprintf("migration steps: step %d has no name or no Up", s.Version))
		}
	}
	return nil
}

// stepsError is a malformed list of steps: a programming error.
type stepsError string

func (e stepsError) Error() string { return string(e) }

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (stepsError) Permanent() bool { return true }
