package embedded

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// sessionRegistry remembers, per logical session, the statements of its latest retryable
// write (lsid + txnNumber) that took effect and what each returned, so a retried command
// replays them instead of applying them twice and runs only the statements the first attempt
// did not reach — the retryable-writes contract, statement by statement as in mongod. Results
// live in memory: a retry that spans a server restart is executed again, which is safe for
// rollup's idempotent writes and is documented in the README.
type sessionRegistry struct {
	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mu       sync.Mutex // serializes commands of one session (a retry waits for the first attempt)
	lastUsed time.Time
	txn      int64
	// stmts[i] is the outcome of statement i of txn (its index in the command, mongod's
	// stmtId) when stmts[i].ok: it took effect. Its array, and pending's, are reused by the
	// session's next writes.
	stmts []stmtOutcome
	// pending holds the outcomes of the running attempt until its writes are durable.
	pending []pendingStmt
}

// stmtOutcome is what one statement of a retryable write returned: the counters of an
// insert, update or delete statement, or the whole reply of a findAndModify.
type stmtOutcome struct {
	ok           bool // the statement took effect
	n, nModified int
	upsert       bool // the statement inserted a document (upserted is its _id, possibly null)
	upserted     any
	reply        *result
}

type pendingStmt struct {
	i int
	o stmtOutcome
}

// retryState is a retryable write's view of its session while it runs (the session is
// locked): the statements already executed, and the ones this attempt executes.
type retryState struct {
	sess *session
}

// done returns the remembered outcome of statement i, if it already took effect.
func (rs *retryState) done(i int) (stmtOutcome, bool) {
	if rs == nil || i >= len(rs.sess.stmts) || !rs.sess.stmts[i].ok {
		return stmtOutcome{}, false
	}
	return rs.sess.stmts[i], true
}

// record remembers that statement i took effect with outcome o, once the attempt's writes
// are durable (commit).
func (rs *retryState) record(i int, o stmtOutcome) {
	if rs == nil {
		return
	}
	o.ok = true
	rs.sess.pending = append(rs.sess.pending, pendingStmt{i: i, o: o})
}

// commit moves this attempt's outcomes into the session (their writes are durable); abort
// forgets them.
func (rs *retryState) commit() {
	s := rs.sess
	for _, p := range s.pending {
		for len(s.stmts) <= p.i {
			s.stmts = append(s.stmts, stmtOutcome{})
		}
		s.stmts[p.i] = p.o
	}
	rs.abort()
}

func (rs *retryState) abort() {
	clear(rs.sess.pending)
	rs.sess.pending = rs.sess.pending[:0]
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

// runRetryable runs a retryable write with its session locked: a newer txnNumber starts a
// new write with no statement executed, the latest one continues it (a retry), an older one
// fails with TransactionTooOld. run sees the session through r.retry; the outcomes it
// records are kept only when it returns no error (a command-level error means the attempt's
// writes may not be durable, so a retry must run them).
func (sr *sessionRegistry) runRetryable(_ context.Context, r *request, run func() (result, error)) (result, error) {
	s := sr.get(r.lsid)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := *r.txnNumber
	switch {
	case n < s.txn:
		return result{}, mongoerr.New(mongoerr.TransactionTooOld, "Retryable write with txnNumber %d is prohibited on session because a newer retryable write with txnNumber %d has already started on this session.", n, s.txn)
	case n > s.txn:
		clear(s.stmts)
		s.txn, s.stmts = n, s.stmts[:0]
	}
	r.retry = &retryState{sess: s}
	res, err := run()
	if err == nil {
		r.retry.commit()
	} else {
		r.retry.abort()
	}
	r.retry = nil
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
