package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/clientconn"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// ErrNoAuthBeyondLoopback is New's error for a listen address beyond loopback without
// Config.Auth (or Config.InsecureNoAuth): anyone who reaches the port could read and write
// everything.
var ErrNoAuthBeyondLoopback = errors.New("listening beyond loopback without authentication")

// checkExposure refuses a listener that is not on a loopback address unless clients must
// authenticate or the Config says to allow it. Before binding (bound nil) it judges the
// configured host when that is an IP address or empty; after, the bound address.
func checkExposure(cfg Config, bound net.Addr) error {
	if cfg.Auth || cfg.InsecureNoAuth {
		return nil
	}
	var ip net.IP
	if bound == nil {
		host, _, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil // Listen reports it
		}
		if ip = net.ParseIP(host); ip == nil && host != "" {
			return nil // a host name: judged once bound
		}
	} else if tcp, ok := bound.(*net.TCPAddr); ok {
		ip = tcp.IP
	}
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s: %w", cfg.Listen, ErrNoAuthBeyondLoopback)
}

// errAuthFailed is mongod's answer to every failed authentication, whatever the reason (the
// reason goes to the server's log only).
var errAuthFailed = mongoerr.New(mongoerr.AuthenticationFailed, "Authentication failed.")

// unauthenticatedCommands are the commands mongod runs before a client authenticates.
var unauthenticatedCommands = map[string]bool{
	"hello": true, "isMaster": true, "ismaster": true, "ping": true,
	"buildInfo": true, "buildinfo": true, "saslStart": true, "saslContinue": true,
}

// authState is a connection's authentication: the user it authenticated as, and the SASL
// conversation in progress.
type authState struct {
	user, db string // "" until authenticated
	drops    int64  // userStore.drops when the user authenticated or was last found
	conv     *saslConv
	lastID   int32
}

// saslConv is a SCRAM-SHA-256 conversation in progress.
type saslConv struct {
	id    int32
	db    string
	scram *scram.ServerConversation
	// skipEmpty: the client asked for the shorter exchange (done with the server's final
	// message); proven: the proof checked and the final message went, the empty exchange is
	// what remains.
	skipEmpty, proven bool
	drops             int64 // userStore.drops before the user was looked up
}

func connAuth(c *clientconn.Conn) *authState {
	if a, ok := c.Auth.(*authState); ok {
		return a
	}
	a := &authState{}
	c.Auth = a
	return a
}

// checkAuth refuses a command from a client that has not authenticated, when the server
// requires authentication. The localhost exception (as mongod's) lets a loopback client
// create the first user in admin while no user exists.
func (s *Server) checkAuth(cs *clientconn.Conn, name string, body bson.D) error {
	if !s.cfg.Auth || unauthenticatedCommands[name] {
		return nil
	}
	if a, ok := cs.Auth.(*authState); ok && a.user != "" && s.stillExists(a) {
		return nil
	}
	if db, _ := bsonval.Get(body, "$db"); name == "createUser" && db == usersDB && isLoopbackAddr(cs.Remote) && !s.users.any() {
		return nil
	}
	return mongoerr.New(mongoerr.Unauthorized, "command %s requires authentication", name)
}

// stillExists reports whether a's user exists, looking it up only after a dropUser.
func (s *Server) stillExists(a *authState) bool {
	drops := s.users.drops.Load()
	if drops == a.drops {
		return true
	}
	if _, ok := s.users.lookup(a.db, a.user); !ok {
		a.user, a.db = "", ""
		return false
	}
	a.drops = drops
	return true
}

func isLoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// saslStart begins a conversation on cs (the saslStart command, or hello's
// speculativeAuthenticate) and returns the reply's fields.
func (s *Server) saslStart(cs *clientconn.Conn, db string, cmd bson.D) (bson.D, error) {
	mech, _ := bsonval.Get(cmd, "mechanism")
	a := connAuth(cs)
	a.conv = nil
	switch mech {
	case scramMech:
	case "SCRAM-SHA-1":
		s.authFailed(cs, db, "", "SCRAM-SHA-1 is not supported: users have SCRAM-SHA-256 credentials only")
		return nil, errAuthFailed
	default:
		return nil, mongoerr.New(mongoerr.MechanismUnavailable, "Received authentication for mechanism %v which is not enabled", mech)
	}
	payload, err := saslPayload(cmd)
	if err != nil {
		return nil, err
	}
	srv, err := scram.SHA256.NewServer(func(name string) (scram.StoredCredentials, error) {
		u, ok := s.users.lookup(db, name)
		if !ok {
			return scram.StoredCredentials{}, errors.New("no such user")
		}
		return u.Credentials.SCRAMSHA256.stored()
	})
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	drops := s.users.drops.Load() // before the lookup: a drop after it is seen by checkAuth
	conv := srv.NewConversation()
	resp, err := conv.Step(string(payload))
	if err != nil {
		s.authFailed(cs, db, conv.Username(), err.Error())
		return nil, errAuthFailed
	}
	a.lastID++
	c := &saslConv{id: a.lastID, db: db, scram: conv, drops: drops}
	if opts, ok := bsonval.Get(cmd, "options"); ok {
		if v, ok := bsonval.Get(asDoc(opts), "skipEmptyExchange"); ok {
			c.skipEmpty = boolArg(v)
		}
	}
	a.conv = c
	return saslReply(c.id, false, resp), nil
}

// saslContinue takes the conversation on cs one step further.
func (s *Server) saslContinue(cs *clientconn.Conn, db string, cmd bson.D) (bson.D, error) {
	a := connAuth(cs)
	c := a.conv
	if c == nil {
		return nil, mongoerr.New(mongoerr.ProtocolError, "No SASL session state found")
	}
	if id, _ := bsonval.Get(cmd, "conversationId"); !sameInt(id, c.id) {
		a.conv = nil
		return nil, mongoerr.New(mongoerr.ProtocolError, "sasl: Mismatched conversation id")
	}
	if db != c.db {
		a.conv = nil
		return nil, mongoerr.New(mongoerr.ProtocolError, "Attempt to switch database target during SASL authentication.")
	}
	payload, err := saslPayload(cmd)
	if err != nil {
		a.conv = nil
		return nil, err
	}
	if c.proven { // the empty exchange that ends a conversation without skipEmptyExchange
		s.authenticated(cs, a, c)
		return saslReply(c.id, true, ""), nil
	}
	resp, err := c.scram.Step(string(payload))
	if err != nil || !c.scram.Valid() {
		a.conv = nil
		reason := "proof does not verify (wrong password)"
		if err != nil {
			reason = err.Error()
		}
		s.authFailed(cs, db, c.scram.Username(), reason)
		return nil, errAuthFailed
	}
	if c.skipEmpty {
		s.authenticated(cs, a, c)
		return saslReply(c.id, true, resp), nil
	}
	c.proven = true
	return saslReply(c.id, false, resp), nil
}

func (s *Server) authenticated(cs *clientconn.Conn, a *authState, c *saslConv) {
	a.user, a.db, a.drops, a.conv = c.scram.Username(), c.db, c.drops, nil
	s.log.Debug("authenticated", zap.Int64("conn", cs.ID), zap.String("remote", cs.Remote),
		zap.String("user", a.user), zap.String("db", a.db), zap.String("mechanism", scramMech))
}

// authFailed logs a failed authentication with its reason, which the client never learns.
func (s *Server) authFailed(cs *clientconn.Conn, db, user, reason string) {
	s.log.Info("authentication failed", zap.Int64("conn", cs.ID), zap.String("remote", cs.Remote),
		zap.String("user", user), zap.String("db", db), zap.String("reason", reason))
}

func saslPayload(cmd bson.D) ([]byte, error) {
	v, _ := bsonval.Get(cmd, "payload")
	switch p := v.(type) {
	case bson.Binary:
		return p.Data, nil
	case string:
		return []byte(p), nil
	}
	return nil, mongoerr.TypeMismatchf("BSON field 'payload' is the wrong type '%s', expected type 'binData'", typeName(v))
}

func saslReply(id int32, done bool, payload string) bson.D {
	return bson.D{
		{Key: "conversationId", Value: id},
		{Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: []byte(payload)}},
	}
}

func sameInt(v any, want int32) bool {
	n, ok := toInt64(v)
	return ok && n == int64(want)
}

// helloAuth returns hello's fields about authentication: saslSupportedMechs for an existing
// user the client names ("db.name"), and the reply to a speculativeAuthenticate saslStart
// (omitted when it fails: the client then authenticates the long way and gets the error).
func (s *Server) helloAuth(r *request) bson.D {
	var f bson.D
	if v, ok := r.arg("saslSupportedMechs"); ok {
		if str, ok := v.(string); ok {
			if db, name, ok := strings.Cut(str, "."); ok {
				if _, found := s.users.lookup(db, name); found {
					f = append(f, bson.E{Key: "saslSupportedMechs", Value: bson.A{scramMech}})
				}
			}
		}
	}
	if v, ok := r.arg("speculativeAuthenticate"); ok {
		d := asDoc(v)
		if len(d) > 0 && d[0].Key == "saslStart" {
			db, _ := bsonval.Get(d, "db")
			dbName, _ := db.(string)
			if dbName == "" {
				dbName = usersDB
			}
			if reply, err := s.saslStart(r.conn, dbName, d); err == nil {
				f = append(f, bson.E{Key: "speculativeAuthenticate", Value: reply})
			}
		}
	}
	return f
}

func cmdSaslStart(_ context.Context, s *Server, r *request) (result, error) {
	f, err := s.saslStart(r.conn, r.db, r.body)
	return result{fields: f}, err
}

func cmdSaslContinue(_ context.Context, s *Server, r *request) (result, error) {
	f, err := s.saslContinue(r.conn, r.db, r.body)
	return result{fields: f}, err
}
