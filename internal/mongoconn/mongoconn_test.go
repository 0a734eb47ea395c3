package mongoconn

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	rstore "github.com/gameops/rollup/store"
)

func TestRedactURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"mongodb://db1", "mongodb://db1"},
		{"mongodb://user:s3cret@db1:27017,db2:27018/rollup?replicaSet=rs0&authSource=admin", "mongodb://db1:27017,db2:27018"},
		{"mongodb+srv://u:p@cluster0.example.net/?retryWrites=true", "mongodb+srv://cluster0.example.net"},
		{"mongodb://u:p%40ss@[::1]:27017/?tls=true", "mongodb://[::1]:27017"},
		{"mongodb://db1/?authMechanismProperties=AWS_SESSION_TOKEN:abc", "mongodb://db1"},
		{"mongodb://db1/?appName=a@b", "mongodb://(unparsable)"},
		{"mongodb://u:pa/ss@db1", "mongodb://db1"},           // unescaped '/' in the password
		{"mongodb://u:pa?ss@db1", "mongodb://(unparsable)"},  // unescaped '?' in the password
		{"mongodb://u:1234?x@db1", "mongodb://(unparsable)"}, // would show u:1234 as a host
		{"mongodb://u:1234/x@db1", "mongodb://db1"},          // idem
		{"postgres://u:p@db1", "(unparsable)"},
		{"db1:27017", "(unparsable)"},
		{"mongodb://", "mongodb://(unparsable)"},
	}
	for _, tc := range tests {
		if got := RedactURI(tc.in); got != tc.want {
			t.Errorf("RedactURI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactURI: whatever the user and password, a well-formed URI shows its hosts only.
func FuzzRedactURI(f *testing.F) {
	f.Add("user", "s3cret", "rollup", "replicaSet=rs0")
	f.Add("u@x", "p:/?@", "", "appName=a@b")
	f.Fuzz(func(t *testing.T, user, password, db, query string) {
		uri := "mongodb://" + url.QueryEscape(user) + ":" + url.QueryEscape(password) + "@db1.example:27017,db2.example/" +
			url.QueryEscape(db) + "?" + query
		if got := RedactURI(uri); got != "mongodb://db1.example:27017,db2.example" {
			t.Fatalf("RedactURI(%q) = %q", uri, got)
		}
		// Any input: the result is empty, marked unparsable, or scheme and hosts without '@'.
		raw := user + password + db + query
		got := RedactURI(raw)
		if got != "" && !strings.HasSuffix(got, "(unparsable)") && (strings.Contains(got, "@") || !strings.Contains(raw, strings.SplitN(got, "://", 2)[1])) {
			t.Fatalf("RedactURI(%q) = %q", raw, got)
		}
	})
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(string) error
		in    string
		ok    bool
	}{
		{"uri empty", CheckURI, "", true},
		{"uri", CheckURI, "mongodb://a,b,c/?replicaSet=rs0", true},
		{"uri srv", CheckURI, "mongodb+srv://u:p@c.example.net", true},
		{"uri no scheme", CheckURI, "db1:27017", false},
		{"uri no host", CheckURI, "mongodb:///x", false},
		{"uri bad password", CheckURI, "mongodb://u:p/w@db1", false},
		{"db", CheckDatabaseName, "rollup", true},
		{"db empty", CheckDatabaseName, "", false},
		{"db dot", CheckDatabaseName, "a.b", false},
		{"db long", CheckDatabaseName, strings.Repeat("x", 64), false},
	} {
		if err := tc.check(tc.in); (err == nil) != tc.ok {
			t.Errorf("%s: %q: err %v, want ok=%v", tc.name, tc.in, err, tc.ok)
		}
	}
}

// TestDurable: the write concern is majority and journaled, WithDatabase writes with it, and
// a database from Database sends it with every write.
func TestDurable(t *testing.T) {
	wc := rstore.DurableWriteConcern()
	if wc.W != "majority" || wc.Journal == nil || !*wc.Journal {
		t.Fatalf("DurableWriteConcern() = %+v, want w majority, j true", wc)
	}
	ctx := testctx.Context(t)
	store := embeddedtest.Start(t)
	name := store.Database(t, store.Client(t)).Name()
	err := WithDatabase(ctx, store.URI, name, func(db *mongo.Database) error {
		_, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "a", Value: 1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// What the store receives: the insert's command carries {w: "majority", j: true}.
	var mu sync.Mutex
	var sent []bson.Raw
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "insert" {
			mu.Lock()
			sent = append(sent, e.Command)
			mu.Unlock()
		}
	}}
	db := Database(store.Client(t, options.Client().SetMonitor(monitor)), name)
	if _, err := db.Collection("c").InsertOne(ctx, bson.D{{Key: "a", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 {
		t.Fatalf("%d insert commands", len(sent))
	}
	w, _ := sent[0].Lookup("writeConcern", "w").StringValueOK()
	j, _ := sent[0].Lookup("writeConcern", "j").BooleanOK()
	if w != "majority" || !j {
		t.Errorf("insert sent writeConcern %v", sent[0].Lookup("writeConcern"))
	}
}

// TestOneShotClientNeverAwaitsHello: the client of a one-shot command (WithDatabase) never
// sends an awaitable hello, which the server holds open for the whole heartbeat interval
// (10 s) and the driver's Disconnect can wait out (see oneShotOptions): before the fix the
// monitor started one right after its first check, and 'rollup tree', 'retention', 'replay'
// and the other one-shot commands took 10 s longer to exit now and then on a loaded machine.
// Its monitor's heartbeats are all plain hellos, and it disconnects at once after a command.
func TestOneShotClientNeverAwaitsHello(t *testing.T) {
	ctx := testctx.Context(t)
	store := embeddedtest.Start(t)
	var started, awaited atomic.Int64
	monitor := &event.ServerMonitor{ServerHeartbeatStarted: func(e *event.ServerHeartbeatStartedEvent) {
		started.Add(1)
		if e.Awaited {
			awaited.Add(1)
		}
	}}
	client, err := mongo.Connect(oneShotOptions(store.URI).SetServerMonitor(monitor))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// A streaming monitor sends its awaitable hello as soon as its first check is done: give
	// it a second to show.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(time.Second); awaited.Load() == 0 && time.Now().Before(deadline); {
		<-tick.C
	}
	start := time.Now()
	if err := client.Disconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Disconnect took %v", took)
	}
	if started.Load() == 0 || awaited.Load() != 0 {
		t.Fatalf("%d heartbeats, %d of them awaitable hellos; want some, none awaitable", started.Load(), awaited.Load())
	}
}
