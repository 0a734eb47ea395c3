package embeddedtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded"
)

// Store is a running store for one test.
type Store struct {
	// URI is the connection string (the embedded server's, or MONGODB_URI).
	URI string
	// Server is the embedded server, nil when running against MONGODB_URI.
	Server *embedded.Server
}

// Real reports whether the test runs against a real MongoDB (MONGODB_URI).
func (s *Store) Real() bool { return s.Server == nil }

// SkipIfReal skips a test that checks embedded-server internals.
func (s *Store) SkipIfReal(t testing.TB) {
	t.Helper()
	if s.Real() {
		t.Skip("checks embedded server internals")
	}
}

// Options tune the embedded server a test starts.
type Options struct {
	// DataDir makes the server durable in that directory ("" = in memory).
	DataDir string
	// Configure may adjust the server config before it starts.
	Configure func(*embedded.Config)
}

// Start returns the store for t: MONGODB_URI when set, else an embedded server with test
// commands enabled, stopped when the test ends.
func Start(t testing.TB, opts ...Options) *Store {
	t.Helper()
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		return &Store{URI: uri}
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	cfg := embedded.Config{
		Listen:             "127.0.0.1:0",
		DataDir:            o.DataDir,
		EnableTestCommands: true,
		Logger:             zaptest.NewLogger(t).Named("embedded"),
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	srv := Serve(t, cfg)
	return &Store{URI: srv.URI(), Server: srv}
}

// Serve starts an embedded server of cfg (Listen "" is 127.0.0.1:0, a nil Logger the test's)
// and stops it when the test ends, failing the test if Run returns an error. Unlike Start it
// never uses MONGODB_URI: it is for tests of the server itself.
func Serve(t testing.TB, cfg embedded.Config) *embedded.Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t).Named("embedded")
	}
	srv, err := embedded.New(cfg)
	if err != nil {
		t.Fatalf("start embedded server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("embedded server: %v", err)
		}
	})
	return srv
}

// ParallelWithFailPoints is t.Parallel() for a test that sets fail points on a store it
// started (Start): with the embedded server each test has a server of its own, so its fail
// points reach no other test and its fixed windows (a fault held, an outage waited out)
// overlap theirs. Against MONGODB_URI every test shares one deployment, where a fail point is
// server-wide (a second test's configureFailPoint replaces the first's, whatever its appName
// filter): there t stays serial, and serial tests never overlap parallel ones. A test that
// sets no fail point and uses its own database (Database) calls t.Parallel() itself.
func ParallelWithFailPoints(t *testing.T) {
	t.Helper()
	if os.Getenv("MONGODB_URI") != "" {
		return
	}
	t.Parallel()
}

// OverlapWaits raises go test's -parallel to n, unless the command line set it, for a
// package whose parallel tests mostly wait (fault windows held on stores of their own, see
// ParallelWithFailPoints): -parallel defaults to GOMAXPROCS, 2 on a 2-core machine, so a
// third window would wait for one of two others to end instead of overlapping them. Call it
// from TestMain before m.Run (it parses the command line).
func OverlapWaits(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && n > 0 {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Client connects the official driver to the store; it is disconnected when the test ends.
func (s *Store) Client(t testing.TB, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	// A short heartbeat bounds how long Disconnect can wait for an in-flight monitoring hello.
	o := options.Client().ApplyURI(s.URI).SetServerSelectionTimeout(10 * time.Second).SetHeartbeatInterval(time.Second)
	all := append([]*options.ClientOptions{o}, opts...)
	c, err := mongo.Connect(all...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Disconnect(ctx); err != nil && !errors.Is(err, mongo.ErrClientDisconnected) {
			t.Errorf("disconnect: %v", err)
		}
	})
	return c
}

// Database returns a fresh database with a unique name, dropped when the test ends (so tests
// never collide on a shared real deployment).
func (s *Store) Database(t testing.TB, c *mongo.Client) *mongo.Database {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_", ".", "_").Replace(t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	db := c.Database("t_" + name + "_" + hex.EncodeToString(b[:]))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = db.Drop(ctx)
	})
	return db
}

// FailPoint runs a configureFailPoint command (failCommand, onPrimaryTransactionalWrite or
// failGetMoreAfterCursorCheckout) and switches that fail point off when the test ends.
func (s *Store) FailPoint(t testing.TB, c *mongo.Client, cmd any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
	name := "failCommand"
	if d, ok := cmd.(bson.D); ok && len(d) > 0 {
		if n, ok := d[0].Value.(string); ok {
			name = n
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		off := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}
		if err := c.Database("admin").RunCommand(ctx, off).Err(); err != nil {
			t.Errorf("switch fail point %s off: %v", name, err)
		}
	})
}
