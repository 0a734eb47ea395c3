package embedded_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

const (
	alicePassword = "correct horse battery staple"
	wrongPassword = "Tr0ub4dor&3"
)

// createRoot creates user name with password through c (on admin, role root).
func createRoot(ctx context.Context, c *mongo.Client, name, password string) error {
	return c.Database("admin").RunCommand(ctx, bson.D{
		{Key: "createUser", Value: name}, {Key: "pwd", Value: password},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: "admin"}}}},
	}).Err()
}

// userURI is srv's URI with credentials for the admin database.
func userURI(srv *embedded.Server, user, password string) string {
	return "mongodb://" + url.UserPassword(user, password).String() + "@" + srv.Addr() + "/?replicaSet=rs0&authSource=admin"
}

// observedLogger returns a logger that records every entry, Debug included.
func observedLogger() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// TestAuthDriver: with Auth, the first user comes from a loopback client (the localhost
// exception), then the Go driver authenticates with the right password (speculatively, in
// hello), gets 18 AuthenticationFailed for a wrong password or an unknown user, and a client
// that did not authenticate gets 13 Unauthorized for anything but the handshake's commands.
// No password reaches the log.
func TestAuthDriver(t *testing.T) {
	log, logs := observedLogger()
	srv := embeddedtest.Serve(t, embedded.Config{Auth: true, Logger: log})
	ctx := ctxFor(t)
	anon := dialClient(t, srv.URI(), 10*time.Second)
	if err := createRoot(ctx, anon, "alice", alicePassword); err != nil {
		t.Fatalf("first user through the localhost exception: %v", err)
	}
	if err := createRoot(ctx, anon, "mallory", wrongPassword); errCode(err) != 13 {
		t.Fatalf("second createUser unauthenticated: %v, want code 13", err)
	}
	err := anon.Database("tlsauth").RunCommand(ctx, bson.D{{Key: "find", Value: "docs"}}).Err()
	if errCode(err) != 13 || !strings.Contains(err.Error(), "command find requires authentication") {
		t.Fatalf("find unauthenticated: %v, want 13 Unauthorized", err)
	}
	for _, cmd := range []string{"ping", "buildInfo", "hello"} {
		if err := anon.Database("admin").RunCommand(ctx, bson.D{{Key: cmd, Value: 1}}).Err(); err != nil {
			t.Fatalf("%s unauthenticated: %v", cmd, err)
		}
	}

	alice := dialClient(t, userURI(srv, "alice", alicePassword), 10*time.Second)
	roundTrip(ctx, t, alice)
	if err := createRoot(ctx, alice, "bob", wrongPassword); err != nil {
		t.Fatalf("createUser by an authenticated user: %v", err)
	}
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", "alice", wrongPassword},
		{"unknown user", "nobody", alicePassword},
	} {
		err := dialClient(t, userURI(srv, tc.user, tc.password), 10*time.Second).Ping(ctx, nil)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 18 || ce.Name != "AuthenticationFailed" || ce.Message != "Authentication failed." {
			t.Fatalf("%s: %v, want (AuthenticationFailed) Authentication failed. with code 18", tc.name, err)
		}
	}
	roundTrip(ctx, t, alice) // the server is healthy after the failures
	if logs.FilterMessage("authentication failed").Len() < 2 {
		t.Errorf("failed authentications not logged: %d entries", logs.FilterMessage("authentication failed").Len())
	}
	for _, e := range logs.All() {
		text := e.Message + " " + fieldsString(e.ContextMap())
		if strings.Contains(text, alicePassword) || strings.Contains(text, wrongPassword) {
			t.Fatalf("a password reached the log: %q", text)
		}
	}
}

func fieldsString(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + strings.TrimSpace(strings.ReplaceAll(toString(v), "\n", " ")) + " ")
	}
	return b.String()
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return ""
	}
	return string(raw)
}

// scramConv is a client's SCRAM-SHA-256 conversation for the raw-protocol tests.
func scramConv(t *testing.T, user, password string) *scram.ClientConversation {
	t.Helper()
	c, err := scram.SHA256.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.NewConversation()
}

func step(t *testing.T, conv *scram.ClientConversation, in []byte) []byte {
	t.Helper()
	out, err := conv.Step(string(in))
	if err != nil {
		t.Fatalf("client SCRAM step: %v", err)
	}
	return []byte(out)
}

func payloadOf(t *testing.T, reply bson.D) []byte {
	t.Helper()
	b, ok := get(reply, "payload").(bson.Binary)
	if !ok {
		t.Fatalf("reply without a binary payload: %v", reply)
	}
	return b.Data
}

func checkOK(t *testing.T, what string, reply bson.D) {
	t.Helper()
	if ok, _ := asInt64(get(reply, "ok")); ok != 1 {
		t.Fatalf("%s: %v", what, reply)
	}
}

// checkErr checks an error reply's code, code name and message.
func checkErr(t *testing.T, what string, reply bson.D, code int64, name, msg string) {
	t.Helper()
	got, _ := asInt64(get(reply, "code"))
	if got != code || get(reply, "codeName") != name || get(reply, "errmsg") != msg {
		t.Fatalf("%s: %v, want %d %s %q", what, reply, code, name, msg)
	}
}

func saslCmd(name string, fields ...bson.E) bson.D {
	return append(bson.D{{Key: name, Value: int32(1)}}, append(fields, bson.E{Key: "$db", Value: "admin"})...)
}

// TestAuthSASLProtocol drives the conversations at the wire level: speculative (in hello,
// with skipEmptyExchange), the long one (saslStart, saslContinue and the empty exchange),
// a wrong proof and an unknown user (18, as mongod), other mechanisms, and
// saslSupportedMechs.
func TestAuthSASLProtocol(t *testing.T) {
	srv := embeddedtest.Serve(t, embedded.Config{Auth: true, Users: []embedded.User{{Name: "alice", Password: alicePassword}}})
	find := bson.D{{Key: "find", Value: "docs"}, {Key: "$db", Value: "tlsauth"}}
	skip := bson.E{Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}}

	t.Run("speculative", func(t *testing.T) {
		rc := dialRaw(t, srv.Addr())
		conv := scramConv(t, "alice", alicePassword)
		hello := rc.command(t, bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.alice"},
			{Key: "speculativeAuthenticate", Value: bson.D{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: "SCRAM-SHA-256"},
				{Key: "payload", Value: bson.Binary{Data: step(t, conv, nil)}}, {Key: "db", Value: "admin"}, skip}},
			{Key: "$db", Value: "admin"}})
		if mechs, _ := get(hello, "saslSupportedMechs").(bson.A); len(mechs) != 1 || mechs[0] != "SCRAM-SHA-256" {
			t.Fatalf("hello saslSupportedMechs: %v", hello)
		}
		spec, _ := get(hello, "speculativeAuthenticate").(bson.D)
		if spec == nil || get(spec, "done") != false {
			t.Fatalf("hello without a speculative reply: %v", hello)
		}
		checkErr(t, "find before the conversation ends", rc.command(t, find), 13, "Unauthorized", "command find requires authentication")
		reply := rc.command(t, saslCmd("saslContinue", bson.E{Key: "conversationId", Value: get(spec, "conversationId")},
			bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, payloadOf(t, spec))}}))
		checkOK(t, "saslContinue", reply)
		if get(reply, "done") != true {
			t.Fatalf("saslContinue with skipEmptyExchange not done: %v", reply)
		}
		step(t, conv, payloadOf(t, reply)) // the client checks the server's signature
		if !conv.Valid() {
			t.Fatal("the server's signature does not verify")
		}
		checkOK(t, "find after authentication", rc.command(t, find))
	})
	t.Run("long conversation", func(t *testing.T) {
		rc := dialRaw(t, srv.Addr())
		conv := scramConv(t, "alice", alicePassword)
		reply := rc.command(t, saslCmd("saslStart", bson.E{Key: "mechanism", Value: "SCRAM-SHA-256"}, bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, nil)}}))
		checkOK(t, "saslStart", reply)
		id := get(reply, "conversationId")
		reply = rc.command(t, saslCmd("saslContinue", bson.E{Key: "conversationId", Value: id}, bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, payloadOf(t, reply))}}))
		checkOK(t, "saslContinue", reply)
		if get(reply, "done") != false {
			t.Fatalf("done before the empty exchange: %v", reply)
		}
		step(t, conv, payloadOf(t, reply))
		checkErr(t, "find before the empty exchange", rc.command(t, find), 13, "Unauthorized", "command find requires authentication")
		reply = rc.command(t, saslCmd("saslContinue", bson.E{Key: "conversationId", Value: id}, bson.E{Key: "payload", Value: bson.Binary{}}))
		if get(reply, "done") != true {
			t.Fatalf("empty exchange: %v", reply)
		}
		checkOK(t, "find after authentication", rc.command(t, find))
	})
	t.Run("failures", func(t *testing.T) {
		rc := dialRaw(t, srv.Addr())
		conv := scramConv(t, "alice", wrongPassword)
		reply := rc.command(t, saslCmd("saslStart", bson.E{Key: "mechanism", Value: "SCRAM-SHA-256"}, bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, nil)}}, skip))
		reply = rc.command(t, saslCmd("saslContinue", bson.E{Key: "conversationId", Value: get(reply, "conversationId")}, bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, payloadOf(t, reply))}}))
		checkErr(t, "wrong password", reply, 18, "AuthenticationFailed", "Authentication failed.")
		checkErr(t, "find after a failure", rc.command(t, find), 13, "Unauthorized", "command find requires authentication")

		conv = scramConv(t, "nobody", alicePassword)
		reply = rc.command(t, saslCmd("saslStart", bson.E{Key: "mechanism", Value: "SCRAM-SHA-256"}, bson.E{Key: "payload", Value: bson.Binary{Data: step(t, conv, nil)}}))
		checkErr(t, "unknown user", reply, 18, "AuthenticationFailed", "Authentication failed.")
		reply = rc.command(t, saslCmd("saslStart", bson.E{Key: "mechanism", Value: "SCRAM-SHA-1"}, bson.E{Key: "payload", Value: bson.Binary{Data: []byte("n,,n=alice,r=abc")}}))
		checkErr(t, "SCRAM-SHA-1", reply, 18, "AuthenticationFailed", "Authentication failed.")
		reply = rc.command(t, saslCmd("saslStart", bson.E{Key: "mechanism", Value: "PLAIN"}, bson.E{Key: "payload", Value: bson.Binary{}}))
		checkErr(t, "PLAIN", reply, 334, "MechanismUnavailable", "Received authentication for mechanism PLAIN which is not enabled")
		reply = rc.command(t, saslCmd("saslContinue", bson.E{Key: "conversationId", Value: int32(1)}, bson.E{Key: "payload", Value: bson.Binary{}}))
		checkErr(t, "saslContinue without saslStart", reply, 17, "ProtocolError", "No SASL session state found")
		hello := rc.command(t, bson.D{{Key: "hello", Value: 1}, {Key: "saslSupportedMechs", Value: "admin.nobody"}, {Key: "$db", Value: "admin"}})
		if get(hello, "saslSupportedMechs") != nil {
			t.Fatalf("saslSupportedMechs for an unknown user: %v", hello)
		}
	})
}

// TestAuthUsersDurable: a user createUser made survives a restart of a durable server (its
// stored SCRAM keys, never the password); usersInfo lists it; dropUser removes it and ends
// what its authenticated connections may do; users of
// the Config (a password, or credentials usersInfo printed) authenticate too and cannot be
// dropped or created again.
func TestAuthUsersDurable(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxFor(t)
	var creds bson.D
	func() {
		srvCtx, cancel := context.WithCancel(context.Background())
		srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", DataDir: dir, Auth: true})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Run(srvCtx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("first server: %v", err)
			}
		}()
		c := dialClient(t, srv.URI(), 10*time.Second)
		if err := createRoot(ctx, c, "alice", alicePassword); err != nil {
			t.Fatal(err)
		}
		alice := dialClient(t, userURI(srv, "alice", alicePassword), 10*time.Second)
		var info struct {
			Users []bson.D `bson:"users"`
		}
		if err := alice.Database("admin").RunCommand(ctx, bson.D{{Key: "usersInfo", Value: "alice"}, {Key: "showCredentials", Value: true}}).Decode(&info); err != nil {
			t.Fatal(err)
		}
		if len(info.Users) != 1 || get(info.Users[0], "user") != "alice" {
			t.Fatalf("usersInfo: %v", info.Users)
		}
		creds, _ = get(info.Users[0], "credentials.SCRAM-SHA-256").(bson.D)
		if creds == nil || strings.Contains(toString(info.Users[0]), alicePassword) {
			t.Fatalf("usersInfo credentials: %v", info.Users[0])
		}
		_ = alice.Disconnect(ctx)
		_ = c.Disconnect(ctx)
	}()

	c := func(d bson.D, k string) string { s, _ := get(d, k).(string); return s }
	n, _ := asInt64(get(creds, "iterationCount"))
	srv := embeddedtest.Serve(t, embedded.Config{DataDir: dir, Auth: true, Users: []embedded.User{
		{Name: "carol", Password: "carol's password"},
		{Name: "dave", DB: "app", SCRAMSHA256: &embedded.SCRAMCredentials{IterationCount: int(n), Salt: c(creds, "salt"), StoredKey: c(creds, "storedKey"), ServerKey: c(creds, "serverKey")}},
	}})
	alice := dialClient(t, userURI(srv, "alice", alicePassword), 10*time.Second)
	roundTrip(ctx, t, alice)
	roundTrip(ctx, t, dialClient(t, userURI(srv, "carol", "carol's password"), 10*time.Second))
	// dave has alice's keys, so alice's password, in the database app.
	roundTrip(ctx, t, dialClient(t, "mongodb://"+url.UserPassword("dave", alicePassword).String()+"@"+srv.Addr()+"/?replicaSet=rs0&authSource=app", 10*time.Second))

	admin := alice.Database("admin")
	if err := createRoot(ctx, alice, "carol", "x"); errCode(err) != 51003 {
		t.Fatalf("createUser of a Config user: %v, want 51003", err)
	}
	if err := createRoot(ctx, alice, "alice", "x"); errCode(err) != 51003 {
		t.Fatalf("createUser of a stored user: %v, want 51003", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "dropUser", Value: "carol"}}).Err(); err == nil || !strings.Contains(err.Error(), "--users") {
		t.Fatalf("dropUser of a Config user: %v", err)
	}
	err := admin.RunCommand(ctx, bson.D{{Key: "createUser", Value: "erin"}, {Key: "pwd", Value: "x"}, {Key: "roles", Value: bson.A{"readWrite"}}}).Err()
	if errCode(err) != 238 {
		t.Fatalf("createUser with role readWrite: %v, want 238 NotImplemented", err)
	}
	var all struct {
		Users []bson.D `bson:"users"`
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "usersInfo", Value: 1}, {Key: "forAllDBs", Value: true}}).Decode(&all); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range all.Users {
		names = append(names, get(u, "_id").(string))
		if get(u, "credentials") != nil {
			t.Fatalf("usersInfo without showCredentials shows credentials: %v", u)
		}
	}
	if strings.Join(names, ",") != "admin.alice,admin.carol,app.dave" {
		t.Fatalf("usersInfo forAllDBs: %v", names)
	}
	if err := createRoot(ctx, alice, "frank", "frank's password"); err != nil {
		t.Fatal(err)
	}
	frank := dialClient(t, userURI(srv, "frank", "frank's password"), 10*time.Second)
	roundTrip(ctx, t, frank)
	if err := admin.RunCommand(ctx, bson.D{{Key: "dropUser", Value: "frank"}}).Err(); err != nil {
		t.Fatalf("dropUser: %v", err)
	}
	// frank's connections authenticated before the drop: they may do nothing more.
	if err := frank.Database("tlsauth").RunCommand(ctx, bson.D{{Key: "find", Value: "docs"}}).Err(); errCode(err) != 13 {
		t.Fatalf("a dropped user's connection: %v, want 13 Unauthorized", err)
	}
	if err := admin.RunCommand(ctx, bson.D{{Key: "dropUser", Value: "frank"}}).Err(); errCode(err) != 11 {
		t.Fatalf("dropUser twice: %v, want 11 UserNotFound", err)
	}
	err = dialClient(t, userURI(srv, "frank", "frank's password"), 10*time.Second).Ping(ctx, nil)
	if errCode(err) != 18 {
		t.Fatalf("dropped user authenticates: %v", err)
	}
}

// TestListenBeyondLoopback: without Auth, New refuses an address beyond loopback unless
// InsecureNoAuth; with Auth it listens.
func TestListenBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  embedded.Config
		ok   bool
	}{
		{"wildcard without auth", embedded.Config{Listen: "0.0.0.0:0"}, false},
		{"empty host without auth", embedded.Config{Listen: ":0"}, false},
		{"loopback without auth", embedded.Config{Listen: "127.0.0.1:0"}, true},
		{"localhost without auth", embedded.Config{Listen: "localhost:0"}, true},
		{"wildcard with auth", embedded.Config{Listen: "0.0.0.0:0", Auth: true}, true},
		{"wildcard insecure", embedded.Config{Listen: "0.0.0.0:0", InsecureNoAuth: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := embedded.New(tc.cfg)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := srv.Run(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, embedded.ErrNoAuthBeyondLoopback) || !strings.Contains(err.Error(), tc.cfg.Listen) {
				t.Fatalf("New = %v, want ErrNoAuthBeyondLoopback naming %s", err, tc.cfg.Listen)
			}
			// Refused before the data directory is touched.
			dir := t.TempDir()
			cfg := tc.cfg
			cfg.DataDir = dir
			if _, err := embedded.New(cfg); !errors.Is(err, embedded.ErrNoAuthBeyondLoopback) {
				t.Fatalf("New with a data directory = %v", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Fatalf("a refused start wrote to the data directory: %v", entries)
			}
		})
	}
}
