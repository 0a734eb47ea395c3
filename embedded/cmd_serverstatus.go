package embedded

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// opCounters counts commands as mongod's serverStatus opcounters do: documents inserted (each
// one attempted), find commands, update and delete statements, getMore commands, and every
// other command.
type opCounters struct {
	insert, query, update, delete, getmore, command atomic.Int64
}

// observe counts one command about to run.
func (c *opCounters) observe(r *request) {
	batch := func(key string) int64 {
		v, _ := r.arg(key)
		a, _ := v.(bson.A)
		return int64(len(a))
	}
	switch r.name {
	case "insert":
		c.insert.Add(batch("documents"))
	case "find":
		c.query.Add(1)
	case "update":
		c.update.Add(batch("updates"))
	case "delete":
		c.delete.Add(batch("deletes"))
	case "getMore":
		c.getmore.Add(1)
	default:
		c.command.Add(1)
	}
}

func (c *opCounters) doc() bson.D {
	return bson.D{
		{Key: "insert", Value: c.insert.Load()},
		{Key: "query", Value: c.query.Load()},
		{Key: "update", Value: c.update.Load()},
		{Key: "delete", Value: c.delete.Load()},
		{Key: "getmore", Value: c.getmore.Load()},
		{Key: "command", Value: c.command.Load()},
	}
}

// cmdServerStatus answers serverStatus with the sections the server really computes: host and
// process, uptime, connections, opcounters, memory (where /proc gives it) and repl with the
// oplog window. Other sections (wiredTiger, locks, network, metrics, …) are absent, as mongod
// omits sections it does not have; a section set to 0 in the command is left out.
func cmdServerStatus(_ context.Context, s *Server, r *request) (result, error) {
	now := time.Now()
	up := now.Sub(s.startTime)
	host, _ := os.Hostname()
	f := bson.D{
		{Key: "host", Value: host},
		{Key: "version", Value: serverVersion},
		{Key: "process", Value: "mongod"},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: up.Seconds()},
		{Key: "uptimeMillis", Value: up.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(up.Seconds())},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(now)},
	}
	sections := []struct {
		name string
		doc  func() (bson.D, bool)
	}{
		{"connections", func() (bson.D, bool) { return s.connectionsDoc(), true }},
		{"opcounters", func() (bson.D, bool) { return s.ops.doc(), true }},
		{"mem", memDoc},
		{"repl", func() (bson.D, bool) { return s.replDoc(), true }},
	}
	for _, sec := range sections {
		if v, ok := r.arg(sec.name); ok && !boolArg(v) {
			continue
		}
		if d, ok := sec.doc(); ok {
			f = append(f, bson.E{Key: sec.name, Value: d})
		}
	}
	return result{fields: f}, nil
}

// connectionsDoc is serverStatus's connections: open now, available (mongod's: 80 % of the
// open-file limit less the open ones), and accepted since the start.
func (s *Server) connectionsDoc() bson.D {
	current, total := s.ln.Connections()
	d := bson.D{{Key: "current", Value: int32(current)}}
	if limit, ok := openFileLimit(); ok {
		d = append(d, bson.E{Key: "available", Value: int32(max(int64(float64(limit)*0.8)-int64(current), 0))})
	}
	return append(d, bson.E{Key: "totalCreated", Value: total})
}

// memDoc is serverStatus's mem: resident and virtual size in MiB from /proc/self/statm;
// absent where there is no /proc.
func memDoc() (bson.D, bool) {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 2 {
		return nil, false
	}
	pages := func(s string) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n * int64(os.Getpagesize()) >> 20, err == nil
	}
	virt, ok1 := pages(fields[0])
	res, ok2 := pages(fields[1])
	if !ok1 || !ok2 {
		return nil, false
	}
	return bson.D{
		{Key: "bits", Value: int32(64)},
		{Key: "resident", Value: int32(res)},
		{Key: "virtual", Value: int32(virt)},
		{Key: "supported", Value: true},
	}, true
}

// replDoc is serverStatus's repl: the single member's set, and the oplog it keeps (its first
// and last entry's time and the window between them, in seconds).
func (s *Server) replDoc() bson.D {
	first, last := s.engine.OplogRange()
	d := bson.D{
		{Key: "topologyVersion", Value: s.topologyVersion()},
		{Key: "hosts", Value: bson.A{s.addr}},
		{Key: "setName", Value: s.cfg.ReplSetName},
		{Key: "setVersion", Value: int32(1)},
		{Key: "isWritablePrimary", Value: true},
		{Key: "secondary", Value: false},
		{Key: "primary", Value: s.addr},
		{Key: "me", Value: s.addr},
		{Key: "lastWrite", Value: bson.D{{Key: "opTime", Value: bson.D{{Key: "ts", Value: last}, {Key: "t", Value: electionTerm}}},
			{Key: "lastWriteDate", Value: bson.NewDateTimeFromTime(time.Unix(int64(last.T), 0))}}},
	}
	if first.T != 0 || first.I != 0 {
		d = append(d, bson.E{Key: "oplog", Value: bson.D{
			{Key: "firstTs", Value: first},
			{Key: "lastTs", Value: last},
			{Key: "windowSecs", Value: int64(last.T) - int64(first.T)},
		}})
	}
	return d
}

// cmdGetCmdLineOpts answers getCmdLineOpts: the process's arguments and the settings the
// server runs with, in mongod's parsed layout.
func cmdGetCmdLineOpts(_ context.Context, s *Server, _ *request) (result, error) {
	argv := bson.A{}
	for _, a := range os.Args {
		argv = append(argv, a)
	}
	netDoc := bson.D{}
	if host, port, err := net.SplitHostPort(s.ln.Addr().String()); err == nil {
		netDoc = append(netDoc, bson.E{Key: "bindIp", Value: host})
		if p, err := strconv.Atoi(port); err == nil {
			netDoc = append(netDoc, bson.E{Key: "port", Value: int32(p)})
		}
	}
	repl := bson.D{{Key: "replSetName", Value: s.cfg.ReplSetName}}
	if mb := s.cfg.Storage.OplogMaxBytes >> 20; mb > 0 {
		repl = append(repl, bson.E{Key: "oplogSizeMB", Value: mb})
	}
	storageDoc := bson.D{{Key: "engine", Value: "rollup-embedded"}}
	if s.cfg.DataDir != "" {
		storageDoc = append(storageDoc, bson.E{Key: "dbPath", Value: s.cfg.DataDir})
	} else {
		storageDoc = append(storageDoc, bson.E{Key: "inMemory", Value: true})
	}
	parsed := bson.D{{Key: "net", Value: netDoc}, {Key: "replication", Value: repl}, {Key: "storage", Value: storageDoc}}
	if s.cfg.EnableTestCommands {
		parsed = append(parsed, bson.E{Key: "setParameter", Value: bson.D{{Key: "enableTestCommands", Value: "1"}}})
	}
	return result{fields: bson.D{{Key: "argv", Value: argv}, {Key: "parsed", Value: parsed}}}, nil
}

// cmdReplSetGetStatus answers replSetGetStatus for the single member the server is.
func cmdReplSetGetStatus(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "replSetGetStatus may only be run against the admin database.")
	}
	now := time.Now()
	last := s.clusterTimeFor(bson.Timestamp{})
	opTime := bson.D{{Key: "ts", Value: last}, {Key: "t", Value: electionTerm}}
	lastDate := bson.NewDateTimeFromTime(time.Unix(int64(last.T), 0))
	member := bson.D{
		{Key: "_id", Value: int32(0)},
		{Key: "name", Value: s.addr},
		{Key: "health", Value: 1.0},
		{Key: "state", Value: int32(1)},
		{Key: "stateStr", Value: "PRIMARY"},
		{Key: "uptime", Value: int64(now.Sub(s.startTime).Seconds())},
		{Key: "optime", Value: opTime},
		{Key: "optimeDate", Value: lastDate},
		{Key: "electionDate", Value: bson.NewDateTimeFromTime(s.startTime)},
		{Key: "self", Value: true},
	}
	return result{fields: bson.D{
		{Key: "set", Value: s.cfg.ReplSetName},
		{Key: "date", Value: bson.NewDateTimeFromTime(now)},
		{Key: "myState", Value: int32(1)},
		{Key: "term", Value: electionTerm},
		{Key: "members", Value: bson.A{member}},
	}}, nil
}
