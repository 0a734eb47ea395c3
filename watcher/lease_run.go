package watcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// PartitionState is one partition as this instance sees it, for metrics (leader state).
type PartitionState struct {
	// Partition is the partition's name ("" for the partition of every project).
	Partition string
	// ID is its lease and checkpoint id.
	ID string
	// Leader says this instance runs the partition now.
	Leader bool
	// Term is the lease term it leads with (0 without leases, or when not leading).
	Term int64
	// Since is when it became the leader (zero when not leading).
	Since time.Time
}

// leadership is the live PartitionState of every partition.
type leadership struct {
	mu    sync.Mutex
	parts []PartitionState
}

func newLeadership(opts Options) *leadership {
	l := &leadership{parts: make([]PartitionState, len(opts.Partitions))}
	for i, p := range opts.Partitions {
		l.parts[i] = PartitionState{Partition: p.Name, ID: p.id(opts.Name)}
	}
	return l
}

func (l *leadership) set(i int, leader bool, term int64, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parts[i].Leader, l.parts[i].Term, l.parts[i].Since = leader, term, since
}

// Leadership returns the state of every partition (Options.Partitions order): whether this
// instance leads it, with which term, since when.
func (w *Watcher) Leadership() []PartitionState {
	w.leaders.mu.Lock()
	defer w.leaders.mu.Unlock()
	return append([]PartitionState(nil), w.leaders.parts...)
}

// defaultOwner is host-pid-random, unique per New.
func defaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// led is a partition this instance runs under a lease.
type led struct {
	ls lease
	// stop ends the partition gracefully (shutdown); kill ends its writes at once (lost).
	stop, kill context.CancelFunc
	// lost says the lease is gone and the partition was killed; it is still exiting.
	lost bool
}

// runLeased is Run with Options.Leases: every LeaseTTL/3 it renews the leases it holds and
// tries to take free or expired ones, running each leased partition until the lease is lost
// (killed at once: its writes are fenced by the term anyway), the partition fails for good
// (Run returns the error), or ctx is done (each partition shuts down gracefully, then the
// leases are released).
func (w *Watcher) runLeased(ctx context.Context) error {
	owner := w.opts.Owner
	if owner == "" {
		owner = defaultOwner()
	}
	ls := leases{coll: w.db.Collection(LeasesCollection, durable()), owner: owner, ttl: w.opts.LeaseTTL, now: w.now}
	parentTerm := w.parentTerm()
	if !parentTerm {
		w.log.Info("parent documents do not carry the lease term (rollup.ParentFromDoc does not read it); parents are fenced by the rev guard and a lease check on every conflict")
	}
	parts := w.opts.Partitions
	running := map[int]*led{}
	exited := make(chan int, len(parts))
	results := make([]error, len(parts))
	var failed error
	// Start acquiring at an offset of our own, so instances do not all contend for the
	// first partitions.
	offset := int(projectHash(owner) % uint32(len(parts)))

	start := func(i int, l lease) {
		f := &fence{term: l.term, parentTerm: parentTerm, check: func(ctx context.Context) error { return ls.check(ctx, l) }}
		pw := w.forPartition(parts[i], f)
		pctx, stop := context.WithCancel(ctx)
		hard, kill := context.WithCancel(context.WithoutCancel(ctx))
		running[i] = &led{ls: l, stop: stop, kill: kill}
		w.stats.takeovers.Add(1)
		w.leaders.set(i, true, l.term, w.now())
		w.log.Info("leading partition", zap.String("lease", l.id), zap.Int64("term", l.term), zap.String("owner", owner))
		go func() {
			results[i] = pw.run(pctx, hard)
			exited <- i
		}()
	}
	lose := func(i int, why string, err error) {
		r := running[i]
		if r.lost {
			return
		}
		r.lost = true
		r.kill()
		r.stop()
		w.stats.leaseLosses.Add(1)
		w.leaders.set(i, false, 0, time.Time{})
		w.log.Warn("lease lost; partition stopped", zap.String("lease", r.ls.id), zap.Int64("term", r.ls.term), zap.String("why", why), zap.Error(err))
	}
	reap := func(i int) {
		r := running[i]
		delete(running, i)
		r.kill()
		r.stop()
		err := results[i]
		switch {
		case err == nil || errors.Is(err, errFenced) || r.lost:
			if errors.Is(err, errFenced) && !r.lost {
				w.stats.leaseLosses.Add(1)
				w.log.Warn("partition fenced by a newer term; standing by", zap.String("lease", r.ls.id), zap.Int64("term", r.ls.term))
			}
			if err == nil && !r.lost {
				w.releaseLease(ctx, ls, r.ls)
			}
		default:
			if failed == nil {
				failed = fmt.Errorf("partition %s: %w", r.ls.id, err)
			}
			w.releaseLease(ctx, ls, r.ls)
		}
		w.leaders.set(i, false, 0, time.Time{})
	}

	interval := w.opts.LeaseTTL / 3
	for ctx.Err() == nil && failed == nil {
		if w.pauseLeases != nil {
			w.pauseLeases()
		}
		for i, r := range running {
			if r.lost {
				continue
			}
			nl, ok, err := ls.renew(ctx, r.ls)
			switch {
			case err == nil && !ok:
				lose(i, "taken over", nil)
			case err == nil:
				r.ls = nl
			case !w.now().Before(r.ls.expires):
				lose(i, "not renewed before it expired", err)
			case ctx.Err() == nil:
				w.log.Warn("lease renewal failed; retrying", zap.String("lease", r.ls.id), zap.Error(err))
			}
		}
		for k := range parts {
			i := (offset + k) % len(parts)
			if len(running) >= w.opts.MaxPartitions || ctx.Err() != nil {
				break
			}
			if running[i] != nil {
				continue
			}
			l, ok, err := ls.acquire(ctx, parts[i].id(w.opts.Name))
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("lease acquisition failed", zap.String("lease", parts[i].id(w.opts.Name)), zap.Error(err))
				}
				continue
			}
			if ok {
				start(i, l)
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
		case i := <-exited:
			reap(i)
		case <-t.C:
		}
		t.Stop()
	}
	// Shutdown (or a failure): every partition stops gracefully, then its lease is released.
	for _, r := range running {
		r.stop()
	}
	for len(running) > 0 {
		reap(<-exited)
	}
	return failed
}

// releaseLease releases l under a short context that outlives ctx; a failure only delays
// the takeover until the lease expires.
func (w *Watcher) releaseLease(ctx context.Context, ls leases, l lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := ls.release(rctx, l); err != nil {
		w.log.Warn("could not release the lease; a standby takes over when it expires", zap.String("lease", l.id), zap.Error(err))
	}
}
