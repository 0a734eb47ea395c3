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
	fp, ok := fps.fire(fpFailCommand, func(fp *failPoint) bool {
		d := fp.cmd
		return d.commands[name] && (d.appName == "" || d.appName == cs.AppName())
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

func cmdConfigureFailPoint(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "configureFailPoint may only be run against the admin database.")
	}
	name, _ := r.body[0].Value.(string)
	switch name {
	case fpFailCommand, fpTxnWrite, fpGetMore:
	default:
		return result{}, mongoerr.NotImplementedf("fail point '%s' (only %s, %s and %s)", name, fpFailCommand, fpTxnWrite, fpGetMore)
	}
	fp, off, err := parseFailMode(r)
	if err != nil {
		return result{}, err
	}
	data := asDoc(valueOr(r, "data"))
	switch name {
	case fpFailCommand:
		fp.cmd, err = parseFailCommandData(data)
		if err == nil && !off && len(fp.cmd.commands) == 0 {
			err = mongoerr.BadValuef("failCommand requires data.failCommands")
		}
	case fpTxnWrite:
		fp.write, err = parseTxnWriteData(data)
	case fpGetMore:
		fp.getMore, err = parseGetMoreData(data)
	}
	if err != nil {
		return result{}, err
	}
	s.fail.mu.Lock()
	count := s.fail.entered[name]
	s.fail.entered[name] = 0
	s.fail.remove(name)
	if !off {
		s.fail.points[name] = fp
		s.fail.armed.Add(1)
	}
	s.fail.mu.Unlock()
	return result{fields: bson.D{{Key: "count", Value: count}}}, nil
}

func valueOr(r *request, key string) any {
	v, _ := r.arg(key)
	return v
}

// parseFailMode reads configureFailPoint's mode: "alwaysOn", "off", {times: n} or {skip: n}.
func parseFailMode(r *request) (fp *failPoint, off bool, err error) {
	fp = &failPoint{}
	modeV, ok := r.arg("mode")
	if !ok {
		return nil, false, mongoerr.New(mongoerr.IllegalOperation, "missing mode")
	}
	switch m := modeV.(type) {
	case string:
		switch m {
		case "alwaysOn":
			fp.alwaysOn = true
		case "off":
			off = true
		default:
			return nil, false, mongoerr.BadValuef("unknown mode: %s", m)
		}
	case bson.D:
		if len(m) != 1 {
			return nil, false, mongoerr.BadValuef("mode object must have exactly one of times, skip")
		}
		if m[0].Key == "activationProbability" {
			return nil, false, mongoerr.NotImplementedf("fail point mode activationProbability")
		}
		n, ok := toInt64(m[0].Value)
		if !ok || n < 0 {
			return nil, false, mongoerr.BadValuef("mode.%s must be a non-negative integer", m[0].Key)
		}
		switch m[0].Key {
		case "times":
			fp.times = n
			off = n == 0
		case "skip":
			fp.skip, fp.alwaysOn = n, true
		default:
			return nil, false, mongoerr.BadValuef("unknown mode field: %s", m[0].Key)
		}
	default:
		return nil, false, mongoerr.TypeMismatchf("mode must be a string or an object")
	}
	return fp, off, nil
}

func parseFailCommandData(d bson.D) (*failCommandData, error) {
	fc := &failCommandData{commands: map[string]bool{}}
	blockConn, blockMS := false, int64(-1)
	for _, e := range d {
		switch e.Key {
		case "failCommands":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.TypeMismatchf("failCommands must be an array of command names")
			}
			for _, v := range arr {
				name, ok := v.(string)
				if !ok {
					return nil, mongoerr.TypeMismatchf("failCommands must be an array of command names")
				}
				fc.commands[name] = true
			}
		case "closeConnection":
			fc.closeConn = boolArg(e.Value)
		case "errorCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			fc.code, fc.hasCode = code, true
		case "errorLabels":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.TypeMismatchf("errorLabels must be an array of strings")
			}
			fc.hasLabels = true
			fc.labels = []string{}
			for _, v := range arr {
				l, ok := v.(string)
				if !ok {
					return nil, mongoerr.TypeMismatchf("errorLabels must be an array of strings")
				}
				fc.labels = append(fc.labels, l)
			}
		case "writeConcernError":
			wc, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.TypeMismatchf("writeConcernError must be an object")
			}
			fc.wcErr = wc
		case "blockConnection":
			blockConn = boolArg(e.Value)
		case "blockTimeMS":
			n, ok := toInt64(e.Value)
			if !ok || n < 0 {
				return nil, mongoerr.TypeMismatchf("blockTimeMS must be a non-negative integer")
			}
			blockMS = n
		case "appName":
			name, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.TypeMismatchf("appName must be a string")
			}
			fc.appName = name
		case "failInternalCommands":
		default:
			return nil, mongoerr.NotImplementedf("failCommand data field '%s'", e.Key)
		}
	}
	if blockConn {
		if blockMS < 0 {
			return nil, mongoerr.BadValuef("blockConnection requires blockTimeMS")
		}
		fc.block = time.Duration(blockMS) * time.Millisecond
	}
	return fc, nil
}

// parseTxnWriteData reads onPrimaryTransactionalWrite's data. As in mongod, closeConnection
// defaults to true: a fail point with no data applies the statement and drops the reply.
func parseTxnWriteData(d bson.D) (*txnWriteData, error) {
	tw := &txnWriteData{closeConn: true}
	for _, e := range d {
		switch e.Key {
		case "closeConnection":
			tw.closeConn = boolArg(e.Value)
		case "failBeforeCommitExceptionCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			tw.failCode, tw.failBefore = code, true
		default:
			return nil, mongoerr.NotImplementedf("onPrimaryTransactionalWrite data field '%s'", e.Key)
		}
	}
	return tw, nil
}

// parseGetMoreData reads failGetMoreAfterCursorCheckout's data: errorCode (default
// InternalError) and the appName filter it shares with failCommand. mongod reads nothing
// else from it (closeConnection, errorLabels: the error's labels are the server's own), so
// those fields are accepted and have no effect here either.
func parseGetMoreData(d bson.D) (*getMoreData, error) {
	gm := &getMoreData{code: mongoerr.InternalError}
	for _, e := range d {
		switch e.Key {
		case "errorCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			gm.code = code
		case "appName":
			name, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.TypeMismatchf("appName must be a string")
			}
			gm.appName = name
		case "closeConnection", "errorLabels", "failInternalCommands":
		default:
			return nil, mongoerr.NotImplementedf("failGetMoreAfterCursorCheckout data field '%s'", e.Key)
		}
	}
	return gm, nil
}

func errorCodeArg(v any) (int32, error) {
	n, ok := toInt64(v)
	if !ok || n != int64(int32(n)) {
		return 0, mongoerr.TypeMismatchf("errorCode must be an integer")
	}
	return int32(n), nil
}
