package embedded

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/clientconn"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// request is one decoded command with the fields every command shares.
type request struct {
	name      string // command name as sent
	db        string
	body      bson.D
	conn      *clientconn.Conn
	lsid      bson.D // nil without a session
	txnNumber *int64
	wc        writeConcern
	deadline  time.Time // from maxTimeMS; zero = none
	// retry is the session's retryable-write state while a retryable write runs.
	retry *retryState
	// closeConn asks for the connection to be closed instead of replying (the
	// onPrimaryTransactionalWrite fail point: the write happened, the reply is lost).
	closeConn bool
}

// arg returns the value of a top-level field of the command.
func (r *request) arg(key string) (any, bool) { return bsonval.Get(r.body, key) }

// result is what a command handler returns: the reply fields (without ok/operationTime/
// $clusterTime) and the optime of the write it made, if any.
type result struct {
	fields bson.D
	opTime bson.Timestamp
	// wcErr is a write-concern error to attach to an otherwise successful reply.
	wcErr bson.D
	// labels are top-level errorLabels to attach.
	labels []string
}

type handler func(ctx context.Context, s *Server, r *request) (result, error)

type commandSpec struct {
	run handler
	// fields lists the command-specific fields accepted besides the generic ones; a field not
	// listed answers NotImplemented naming it, never a silently ignored option.
	fields []string
	// write marks commands that accept a write concern and may be retryable writes.
	write bool
	// retryable marks commands whose (lsid, txnNumber) result is remembered.
	retryable bool
	// statements marks retryable commands that remember and replay each statement
	// themselves (writeStatements); the others are a single statement remembered whole.
	statements bool
	// testOnly marks commands available only with EnableTestCommands.
	testOnly bool
}

func commandTable() map[string]commandSpec {
	return map[string]commandSpec{
		// hello is not strict in mongod either: drivers add fields newer servers understand.
		"hello":              {run: cmdHello, fields: []string{"*"}},
		"isMaster":           {run: cmdHello, fields: []string{"*"}},
		"ismaster":           {run: cmdHello, fields: []string{"*"}},
		"ping":               {run: cmdPing},
		"buildInfo":          {run: cmdBuildInfo},
		"buildinfo":          {run: cmdBuildInfo},
		"getParameter":       {run: cmdGetParameter, fields: []string{"*"}},
		"endSessions":        {run: cmdEndSessions},
		"killAllSessions":    {run: cmdKillAllSessions},
		"listDatabases":      {run: cmdListDatabases, fields: []string{"nameOnly", "filter", "authorizedDatabases"}},
		"listCollections":    {run: cmdListCollections, fields: []string{"filter", "nameOnly", "authorizedCollections", "cursor"}},
		"create":             {run: cmdCreate, fields: []string{"changeStreamPreAndPostImages", "viewOn", "pipeline"}, write: true},
		"collMod":            {run: cmdCollMod, fields: []string{"changeStreamPreAndPostImages", "index"}, write: true},
		"renameCollection":   {run: cmdRenameCollection, fields: []string{"to", "dropTarget", "stayTemp"}, write: true},
		"drop":               {run: cmdDrop, write: true},
		"dropDatabase":       {run: cmdDropDatabase, write: true},
		"createIndexes":      {run: cmdCreateIndexes, fields: []string{"indexes", "commitQuorum"}, write: true},
		"listIndexes":        {run: cmdListIndexes, fields: []string{"cursor"}},
		"dropIndexes":        {run: cmdDropIndexes, fields: []string{"index"}, write: true},
		"insert":             {run: cmdInsert, fields: []string{"documents", "ordered", "bypassDocumentValidation"}, write: true, retryable: true, statements: true},
		"update":             {run: cmdUpdate, fields: []string{"updates", "ordered", "bypassDocumentValidation", "let"}, write: true, retryable: true, statements: true},
		"delete":             {run: cmdDelete, fields: []string{"deletes", "ordered", "let"}, write: true, retryable: true, statements: true},
		"findAndModify":      {run: cmdFindAndModify, fields: famFields, write: true, retryable: true},
		"findandmodify":      {run: cmdFindAndModify, fields: famFields, write: true, retryable: true},
		"find":               {run: cmdFind, fields: findFields},
		"getMore":            {run: cmdGetMore, fields: []string{"collection", "batchSize"}},
		"killCursors":        {run: cmdKillCursors, fields: []string{"cursors"}},
		"count":              {run: cmdCount, fields: []string{"query", "limit", "skip", "hint", "collation", "fields"}},
		"distinct":           {run: cmdDistinct, fields: []string{"key", "query", "collation", "hint"}},
		"aggregate":          {run: cmdAggregate, fields: []string{"pipeline", "cursor", "allowDiskUse", "collation", "hint", "let", "bypassDocumentValidation"}},
		"configureFailPoint": {run: cmdConfigureFailPoint, fields: []string{"mode", "data"}, testOnly: true},
		// Authentication (auth.go) and users (cmd_users.go).
		"saslStart":    {run: cmdSaslStart, fields: []string{"mechanism", "payload", "autoAuthorize", "options"}},
		"saslContinue": {run: cmdSaslContinue, fields: []string{"conversationId", "payload"}},
		"createUser":   {run: cmdCreateUser, fields: createUserFields, write: true},
		"dropUser":     {run: cmdDropUser, write: true},
		"usersInfo":    {run: cmdUsersInfo, fields: usersInfoFields},
		// Operators' tools (cmd_serverstatus.go, cmd_hostinfo.go, cmd_explain.go).
		"serverStatus":     {run: cmdServerStatus, fields: []string{"*"}},
		"hostInfo":         {run: cmdHostInfo},
		"getCmdLineOpts":   {run: cmdGetCmdLineOpts},
		"replSetGetStatus": {run: cmdReplSetGetStatus, fields: []string{"initialSync"}},
		"explain":          {run: cmdExplain, fields: []string{"verbosity"}},
	}
}

// connHandler runs the commands of the server's connections.
type connHandler struct{ s *Server }

var _ clientconn.Handler = connHandler{}

func (h connHandler) Handle(ctx context.Context, c *clientconn.Conn, cmd bson.D) (bson.D, error) {
	return h.s.execute(ctx, c, cmd)
}

func (h connHandler) ErrorReply(err error) bson.D { return h.s.errorReply(err, bson.Timestamp{}) }

// execute runs one command and returns its complete reply document. It returns an error only
// when the connection must be closed without a reply.
func (s *Server) execute(ctx context.Context, cs *clientconn.Conn, body bson.D) (bson.D, error) {
	if len(body) == 0 {
		return s.errorReply(mongoerr.New(mongoerr.FailedToParse, "empty command document"), bson.Timestamp{}), nil
	}
	name := body[0].Key
	spec, ok := s.commands()[name]
	if !ok || (spec.testOnly && !s.cfg.EnableTestCommands) {
		if spec.testOnly {
			return s.errorReply(mongoerr.New(mongoerr.CommandNotFound, "no such command: '%s'", name), bson.Timestamp{}), nil
		}
		return s.errorReply(mongoerr.NotImplementedf("command '%s'", name), bson.Timestamp{}), nil
	}
	if err := s.checkAuth(cs, name, body); err != nil {
		return s.errorReply(err, bson.Timestamp{}), nil
	}
	r, err := s.parseRequest(cs, name, body, spec)
	if err != nil {
		return s.errorReply(err, bson.Timestamp{}), nil
	}
	s.ops.observe(r)
	fp, err := s.fail.evaluate(ctx, name, cs, r)
	if err != nil {
		return nil, err // closeConnection
	}
	if fp != nil && fp.err != nil {
		return s.errorReply(fp.err, bson.Timestamp{}), nil
	}

	var res result
	switch {
	case spec.retryable && r.lsid != nil && r.txnNumber != nil && spec.statements:
		res, err = s.sessions.runRetryable(ctx, r, func() (result, error) { return spec.run(ctx, s, r) })
	case spec.retryable && r.lsid != nil && r.txnNumber != nil:
		res, err = s.sessions.runRetryable(ctx, r, func() (result, error) { return s.runOneStatement(ctx, spec, r) })
	default:
		res, err = spec.run(ctx, s, r)
	}
	if r.closeConn {
		return nil, clientconn.ErrCloseConnection
	}
	if err != nil {
		return s.errorReply(err, res.opTime), nil
	}
	if fp != nil && fp.wcErr != nil {
		res.wcErr = fp.wcErr
		res.labels = append(res.labels, fp.labels...)
	}
	if spec.write && res.wcErr == nil {
		res.wcErr = r.wc.check()
	}
	return s.okReply(res), nil
}

// runOneStatement runs a retryable write that is one statement (findAndModify): a retry
// replays the remembered reply; otherwise onPrimaryTransactionalWrite may fail it unapplied,
// or close the connection once it has written.
func (s *Server) runOneStatement(ctx context.Context, spec commandSpec, r *request) (result, error) {
	if o, ok := r.retry.done(0); ok {
		return *o.reply, nil
	}
	if act := s.fail.beforeTxnWrite(r); act.failErr != nil {
		r.closeConn = act.closeConn
		return result{}, act.failErr
	}
	res, err := spec.run(ctx, s, r)
	if err == nil {
		kept := res
		kept.fields = slices.Clip(res.fields)
		r.retry.record(0, stmtOutcome{reply: &kept})
		if res.opTime != (bson.Timestamp{}) { // it wrote
			r.closeConn = s.fail.afterTxnWrite().closeConn
		}
	}
	return res, err
}

func (s *Server) commands() map[string]commandSpec {
	s.cmdOnce.Do(func() { s.cmdTable = commandTable() })
	return s.cmdTable
}

func (s *Server) parseRequest(cs *clientconn.Conn, name string, body bson.D, spec commandSpec) (*request, error) {
	r := &request{name: name, body: body, conn: cs}
	allowed := map[string]bool{}
	for _, f := range spec.fields {
		allowed[f] = true
	}
	for i, e := range body {
		if i == 0 {
			continue
		}
		switch e.Key {
		case "$db":
			db, ok := e.Value.(string)
			if !ok || db == "" {
				return nil, mongoerr.New(mongoerr.InvalidNamespace, "invalid database name in $db")
			}
			r.db = db
		case "lsid":
			d, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.TypeMismatchf("BSON field '%s.lsid' is the wrong type, expected type 'object'", name)
			}
			r.lsid = d
		case "txnNumber":
			n, ok := e.Value.(int64)
			if !ok {
				return nil, mongoerr.TypeMismatchf("BSON field '%s.txnNumber' is the wrong type, expected type 'long'", name)
			}
			r.txnNumber = &n
		case "writeConcern":
			wc, err := parseWriteConcern(e.Value)
			if err != nil {
				return nil, err
			}
			r.wc = wc
		case "maxTimeMS":
			ms, ok := toInt64(e.Value)
			if !ok || ms < 0 {
				return nil, mongoerr.BadValuef("maxTimeMS must be a non-negative integer")
			}
			if ms > 0 {
				r.deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
			}
		case "autocommit", "startTransaction":
			return nil, mongoerr.NotImplementedf("transactions (field '%s' of command '%s')", e.Key, name)
		default:
			if isGenericField(e.Key) || allowed[e.Key] || allowed["*"] {
				continue
			}
			return nil, mongoerr.NotImplementedf("option '%s' of command '%s'", e.Key, name)
		}
	}
	if r.db == "" {
		return nil, mongoerr.New(40571, "OP_MSG requests require a $db argument")
	}
	if r.txnNumber != nil && r.lsid == nil {
		return nil, mongoerr.New(50768, "txnNumber may only be provided for multi-document transactions and retryable write commands with a session")
	}
	return r, checkOptions(r)
}

// writeConcern is the parsed writeConcern argument. Every acknowledged write in the embedded
// server is already durable before it is acknowledged, so j and "majority" need no waiting.
type writeConcern struct {
	w     any // nil (default), int, or string
	unack bool
}

func parseWriteConcern(v any) (writeConcern, error) {
	d, ok := v.(bson.D)
	if !ok {
		return writeConcern{}, mongoerr.FailedToParsef("writeConcern must be an object")
	}
	var wc writeConcern
	for _, e := range d {
		switch e.Key {
		case "w":
			switch x := e.Value.(type) {
			case string:
				wc.w = x
			default:
				n, ok := toInt64(x)
				if !ok || n < 0 {
					return writeConcern{}, mongoerr.FailedToParsef("w has to be a number or a string")
				}
				wc.w = n
				wc.unack = n == 0
			}
		case "j", "fsync":
			if _, ok := e.Value.(bool); !ok {
				if _, ok := toInt64(e.Value); !ok {
					return writeConcern{}, mongoerr.FailedToParsef("writeConcern.%s must be a boolean", e.Key)
				}
			}
		case "wtimeout", "wtimeoutMS":
			if _, ok := toInt64(e.Value); !ok {
				return writeConcern{}, mongoerr.FailedToParsef("writeConcern.%s must be a number", e.Key)
			}
		case "provenance", "getLastError":
		default:
			return writeConcern{}, mongoerr.FailedToParsef("unrecognized write concern field: %s", e.Key)
		}
	}
	return wc, nil
}

// check returns the writeConcernError a single-node replica set gives for this concern, or nil.
func (wc writeConcern) check() bson.D {
	switch w := wc.w.(type) {
	case int64:
		if w > 1 {
			return bson.D{
				{Key: "code", Value: int32(100)},
				{Key: "codeName", Value: "UnsatisfiableWriteConcern"},
				{Key: "errmsg", Value: "Not enough data-bearing nodes"},
			}
		}
	case string:
		if w != "majority" {
			return bson.D{
				{Key: "code", Value: int32(79)},
				{Key: "codeName", Value: "UnknownReplWriteConcern"},
				{Key: "errmsg", Value: fmt.Sprintf("No write concern mode named '%s' found in replica set configuration", w)},
			}
		}
	}
	return nil
}

// clusterTimeFor returns the time a reply reports: the write's optime, or the last committed one.
func (s *Server) clusterTimeFor(op bson.Timestamp) bson.Timestamp {
	if op.T != 0 || op.I != 0 {
		return op
	}
	if last := s.engine.LastOpTime(); last.T != 0 || last.I != 0 {
		return last
	}
	return bson.Timestamp{T: uint32(s.startTime.Unix()), I: 0}
}

func (s *Server) clusterTimeDoc(ts bson.Timestamp) bson.D {
	return bson.D{
		{Key: "clusterTime", Value: ts},
		{Key: "signature", Value: bson.D{
			{Key: "hash", Value: bson.Binary{Subtype: 0, Data: make([]byte, 20)}},
			{Key: "keyId", Value: int64(0)},
		}},
	}
}

func (s *Server) okReply(res result) bson.D {
	reply := append(res.fields, bson.E{Key: "ok", Value: 1.0})
	if res.wcErr != nil {
		reply = append(reply, bson.E{Key: "writeConcernError", Value: res.wcErr})
	}
	if len(res.labels) > 0 {
		reply = append(reply, bson.E{Key: "errorLabels", Value: stringsToA(res.labels)})
	}
	if code, ok := toInt64(valueOf(res.wcErr, "code")); ok && isStateChangeCode(int32(code)) {
		// As mongod 4.4+ for a "not primary" or "shutting down" writeConcernError: the reply's
		// topologyVersion tells drivers the topology did not change, so they neither mark the
		// server Unknown nor clear its pool (which would make the retry's connection checkout
		// fail with PoolClearedError, and the driver give up with the first error).
		reply = append(reply, bson.E{Key: "topologyVersion", Value: s.topologyVersion()})
	}
	ts := s.clusterTimeFor(res.opTime)
	return append(reply,
		bson.E{Key: "$clusterTime", Value: s.clusterTimeDoc(s.clusterTimeFor(bson.Timestamp{}))},
		bson.E{Key: "operationTime", Value: ts})
}

func (s *Server) errorReply(err error, op bson.Timestamp) bson.D {
	e := mongoerr.As(err)
	reply := bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: e.Msg},
		{Key: "code", Value: e.Code},
		{Key: "codeName", Value: e.CodeName()},
	}
	for _, f := range e.Extra {
		reply = append(reply, bson.E{Key: f.Key, Value: f.Value})
	}
	if len(e.Labels) > 0 {
		reply = append(reply, bson.E{Key: "errorLabels", Value: stringsToA(e.Labels)})
	}
	if isStateChangeCode(e.Code) && (!isShutdownCode(e.Code) || s.shuttingDown()) {
		// As mongod 4.4+: lets drivers see the topology did not change (SDAM error handling).
		reply = append(reply, bson.E{Key: "topologyVersion", Value: s.topologyVersion()})
	}
	ts := s.clusterTimeFor(op)
	return append(reply,
		bson.E{Key: "$clusterTime", Value: s.clusterTimeDoc(s.clusterTimeFor(bson.Timestamp{}))},
		bson.E{Key: "operationTime", Value: ts})
}

func stringsToA(ss []string) bson.A {
	a := make(bson.A, len(ss))
	for i, s := range ss {
		a[i] = s
	}
	return a
}

// toInt64 converts an integral BSON number to int64.
func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) > 1<<62 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// boolArg interprets a BSON value as a boolean the way mongod does for option flags.
func boolArg(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil:
		return false
	}
	if f, ok := bsonval.ToFloat(v); ok {
		return f != 0
	}
	return true
}

// collArg returns the collection name in the command's first field.
func collArg(r *request) (string, error) {
	c, ok := r.body[0].Value.(string)
	if !ok || c == "" {
		return "", mongoerr.New(mongoerr.InvalidNamespace, "collection name has invalid type %s", typeName(r.body[0].Value))
	}
	if strings.HasPrefix(c, "system.") || strings.ContainsAny(c, "\x00$") {
		return "", mongoerr.New(mongoerr.InvalidNamespace, "Invalid collection name: %s", c)
	}
	return c, nil
}

// typeName names a decoded value's BSON type as mongod's messages do.
func typeName(v any) string { return bsonval.TypeName(v) }

// isStateChangeCode reports "not writable primary" and "node is recovering" errors (SDAM spec).
func isStateChangeCode(code int32) bool {
	switch code {
	case 10107, 13435, 13436, 11600, 11602, 189, 91, 10058:
		return true
	}
	return false
}
