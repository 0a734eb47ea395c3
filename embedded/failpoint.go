package embedded

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/clientconn"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// Fail points the embedded server implements, configured by configureFailPoint exactly as
// mongod's test command (enabled only with EnableTestCommands).
const (
	// fpFailCommand fails, blocks or disconnects the listed commands before they run.
	fpFailCommand = "failCommand"
	// fpTxnWrite (mongod's onPrimaryTransactionalWrite) fires on each statement of a
	// retryable write: it closes the connection after the statement is applied (the reply is
	// lost) or fails the statement before it is applied (failBeforeCommitExceptionCode).
	fpTxnWrite = "onPrimaryTransactionalWrite"
	// fpGetMore (mongod's failGetMoreAfterCursorCheckout) fails a getMore with errorCode once
	// its cursor is checked out; the cursor is killed, as when a real getMore fails.
	fpGetMore = "failGetMoreAfterCursorCheckout"
)

// failPoints holds the configured fail points by name; a name absent from the map is off.
type failPoints struct {
	// armed counts the configured fail points, so that commands skip the lock while none is
	// (every statement of a retryable write evaluates onPrimaryTransactionalWrite).
	armed  atomic.Int32
	mu     sync.Mutex
	points map[string]*failPoint
	// entered counts, per fail point name, the activations since it was last configured
	// (the "count" configureFailPoint answers).
	entered map[string]int64
}

// failPoint is one configured fail point: its mode and its parsed data (immutable once
// configured; only the mode's counters change, under failPoints.mu).
type failPoint struct {
	alwaysOn bool  // fires on every evaluation once skip is used up
	times    int64 // remaining activations when !alwaysOn
	skip     int64 // evaluations to let through first

	cmd     *failCommandData
	write   *txnWriteData
	getMore *getMoreData
}

type failCommandData struct {
	commands  map[string]bool
	closeConn bool
	code      int32
	hasCode   bool
	labels    []string
	hasLabels bool
	wcErr     bson.D
	block     time.Duration
	appName   string
}

type txnWriteData struct {
	closeConn  bool // default true, as in mongod
	failCode   int32
	failBefore bool
}

type getMoreData struct {
	code    int32 // default InternalError
	appName string
}

// failAction is what an activated failCommand does to one command.
type failAction struct {
	err    error
	wcErr  bson.D
	labels []string
}

func newFailPoints() *failPoints {
	return &failPoints{points: map[string]*failPoint{}, entered: map[string]int64{}}
}

// fire evaluates the named fail point once for an evaluation its filter accepts: it reports
// whether it fires, consuming one activation (skip first, then times). accept runs under the
// lock and must not block.
func (fps *failPoints) fire(name string, accept func(fp *failPoint) bool) (*failPoint, bool) {
	if fps.armed.Load() == 0 {
		return nil, false
	}
	fps.mu.Lock()
	defer fps.mu.Unlock()
	fp := fps.points[name]
	if fp == nil || (accept != nil && !accept(fp)) {
		return nil, false
	}
	if fp.skip > 0 {
		fp.skip--
		return nil, false
	}
	if !fp.alwaysOn {
		fp.times--
		if fp.times <= 0 {
			fps.remove(name)
		}
	}
	fps.entered[name]++
	return fp, true
}

// retryableCodes are the error codes mongod labels RetryableWriteError (retryable-writes spec).
func isRetryableCode(code int32) bool {
	switch code {
	case 6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 134:
		return true
	}
	return false
}

func isRetryableWriteCommand(r *request) bool {
	switch r.name {
	case "insert", "update", "delete", "findAndModify", "findandmodify":
		return r.txnNumber != nil
	}
	return false
}

// evaluate consumes one activation of failCommand for this command, if it applies, blocks
// when asked, and returns what to do. It returns clientconn.ErrCloseConnection for closeConnection.
func (fps *failPoints) evaluate(ctx context.Context, name string, cs *clientconn.Conn, r *request) (*failAction, error) {
	app := cs.AppName()
	if app == "" {
		app = handshakeAppName(name, r)
	}
	fp, ok := fps.fire(fpFailCommand, func(fp *failPoint) bool {
		d := fp.cmd
		return d.commands[name] && (d.appName == "" || d.appName == app)
	})
	if !ok {
		return nil, nil
	}
	fc := fp.cmd
	if fc.block > 0 {
		t := time.NewTimer(fc.block)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if fc.closeConn {
		return nil, clientconn.ErrCloseConnection
	}
	labels := fc.labels
	act := &failAction{}
	if fc.hasCode {
		if !fc.hasLabels && isRetryableCode(fc.code) && isRetryableWriteCommand(r) {
			labels = []string{"RetryableWriteError"}
		}
		act.err = &mongoerr.Error{Code: fc.code, Msg: "Failing command via 'failCommand' failpoint", Labels: labels}
		return act, nil
	}
	if fc.wcErr != nil {
		if !fc.hasLabels && isRetryableWriteCommand(r) {
			if c, ok := toInt64(valueOf(fc.wcErr, "code")); ok && isRetryableCode(int32(c)) {
				labels = []string{"RetryableWriteError"}
			}
		}
		act.wcErr, act.labels = fc.wcErr, labels
		return act, nil
	}
	return nil, nil
}

// txnWriteAction is what onPrimaryTransactionalWrite does to one statement of a retryable
// write: fail it unapplied (failErr), and/or close the connection once the statements so far
// are durable, without a reply.
type txnWriteAction struct {
	failErr   error
	closeConn bool
}

// beforeTxnWrite evaluates onPrimaryTransactionalWrite configured with
// failBeforeCommitExceptionCode, for a statement of a retryable write (r.txnNumber set) about
// to run: the statement fails unapplied. mongod rolls back a statement that wrote; the
// embedded server cannot, so it decides before the statement runs, and a statement that
// would have written nothing (no match, a duplicate key) also uses an activation here.
func (fps *failPoints) beforeTxnWrite(r *request) txnWriteAction {
	fp, ok := fps.fire(fpTxnWrite, func(fp *failPoint) bool { return fp.write.failBefore })
	if !ok {
		return txnWriteAction{}
	}
	return txnWriteAction{
		closeConn: fp.write.closeConn,
		failErr: mongoerr.New(fp.write.failCode, "Failing write for %s:%d due to failpoint. The write must not be reflected.",
			bsonval.Format(r.lsid), *r.txnNumber),
	}
}

// afterTxnWrite evaluates onPrimaryTransactionalWrite without failBeforeCommitExceptionCode
// for a statement of a retryable write that has just written, as mongod does once the
// statement's oplog entry exists: with closeConnection (the default) the reply is lost.
// Statements a retry replays from the session write nothing and do not evaluate it.
func (fps *failPoints) afterTxnWrite() txnWriteAction {
	fp, ok := fps.fire(fpTxnWrite, func(fp *failPoint) bool { return !fp.write.failBefore })
	if !ok {
		return txnWriteAction{}
	}
	return txnWriteAction{closeConn: fp.write.closeConn}
}

// onGetMore evaluates failGetMoreAfterCursorCheckout for a getMore whose cursor is checked
// out, returning the error it fails with.
func (fps *failPoints) onGetMore(cs *clientconn.Conn) error {
	fp, ok := fps.fire(fpGetMore, func(fp *failPoint) bool {
		return fp.getMore.appName == "" || fp.getMore.appName == cs.AppName()
	})
	if !ok {
		return nil
	}
	return mongoerr.New(fp.getMore.code, "Hit the 'failGetMoreAfterCursorCheckout' failpoint")
}

// remove switches a fail point off; fps.mu is held.
func (fps *failPoints) remove(name string) {
	if _, ok := fps.points[name]; ok {
		delete(fps.points, name)
		fps.armed.Add(-1)
	}
}

func valueOf(d bson.D, key string) any {
	v, _ := bsonval.Get(d, key)
	return v
}

// handshakeAppName is the application name a connection's handshake hello carries
// (client.application.name), so that failCommand with appName fires on the handshake itself,
// before the connection has recorded the name, as in mongod.
func handshakeAppName(name string, r *request) string {
	switch name {
	case "hello", "isMaster", "ismaster":
	default:
		return ""
	}
	client, _ := r.arg("client")
	app, _ := bsonval.Lookup(asDoc(client), "application.name")
	s, _ := app.(string)
	return s
}

// isShutdownCode reports mongod's ShutdownError category (ShutdownInProgress,
// InterruptedAtShutdown): mongod's error replies carry a topologyVersion for them only while it
// really shuts down, so a fail point's 91 has none and drivers mark the server Unknown and
// clear its pool, as they do against mongod. (A writeConcernError keeps its topologyVersion:
// see docs/spec-tests.md, issue #15 item 4.)
func isShutdownCode(code int32) bool { return code == 91 || code == 11600 }

// shuttingDown reports whether the server's Run is ending.
func (s *Server) shuttingDown() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}
