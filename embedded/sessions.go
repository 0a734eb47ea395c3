package embedded

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// sessionRegistry remembers, per logical session, the result of its latest retryable write
// (lsid + txnNumber), so a retried statement returns the first result instead of being
// applied twice — the retryable-writes contract. Results live in memory: a retry that spans a
// server restart is executed again, which is safe for rollup's idempotent writes and is
// documented in the README.
type sessionRegistry struct {
	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mu       sync.Mutex // serializes commands of one session (a retry waits for the first attempt)
	lastUsed time.Time
	txn      int64
	done     bool
	res      result
}

func newSessionRegistry() *sessionRegistry {
	return &sessionRegistry{sessions: map[string]*session{}}
}

func sessionKey(lsid bson.D) string {
	id, _ := bsonval.Get(lsid, "id")
	return string(bsonval.KeyOf(id))
}

func (sr *sessionRegistry) get(lsid bson.D) *session {
	k := sessionKey(lsid)
	sr.mu.Lock()
	defer sr.mu.Unlock()
	s, ok := sr.sessions[k]
	if !ok {
		s = &session{txn: -1}
		sr.sessions[k] = s
	}
	s.lastUsed = time.Now()
	return s
}

// runRetryable runs a retryable write once per (lsid, txnNumber): a repeat of the latest
// txnNumber returns the remembered result, an older one fails with TransactionTooOld.
func (sr *sessionRegistry) runRetryable(_ context.Context, r *request, run func() (result, error)) (result, error) {
	s := sr.get(r.lsid)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := *r.txnNumber
	switch {
	case n < s.txn:
		return result{}, mongoerr.New(225, "Retryable write with txnNumber %d is prohibited on session because a newer retryable write with txnNumber %d has already started on this session.", n, s.txn)
	case n == s.txn && s.done:
		return s.res, nil
	}
	res, err := run()
	// A command-level error is not remembered: the statement did not execute, so a retry must.
	s.txn, s.done, s.res = n, err == nil, res
	return res, err
}

func (sr *sessionRegistry) end(lsid bson.D) {
	k := sessionKey(lsid)
	sr.mu.Lock()
	delete(sr.sessions, k)
	sr.mu.Unlock()
}

func (sr *sessionRegistry) endAll() {
	sr.mu.Lock()
	sr.sessions = map[string]*session{}
	sr.mu.Unlock()
}

func (sr *sessionRegistry) reap(now time.Time, idle time.Duration) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	for k, s := range sr.sessions {
		if now.Sub(s.lastUsed) > idle {
			delete(sr.sessions, k)
		}
	}
}
