package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/clientconn"
	"github.com/gameops/rollup/embedded/storage"
)

// Config configures a Server.
type Config struct {
	// Listen is the TCP address to listen on, e.g. "127.0.0.1:27017" or "127.0.0.1:0".
	Listen string
	// DataDir is the data directory; empty means in-memory (nothing survives the process).
	DataDir string
	// ReplSetName is the advertised replica-set name; default "rs0".
	ReplSetName string
	// EnableTestCommands enables configureFailPoint, like mongod's enableTestCommands.
	EnableTestCommands bool
	// Logger receives the server's logs; nil means no logging.
	Logger *zap.Logger
	// Storage tunes the storage engine; its Dir and Logger are set from this Config.
	Storage storage.Options
	// CursorTimeout is how long an idle cursor lives; default 10 minutes.
	CursorTimeout time.Duration
	// TTLMonitorInterval is how often the TTL monitor deletes the documents TTL indexes say
	// have expired; default 60 s, as MongoDB's ttlMonitorSleepSecs. Negative disables it.
	TTLMonitorInterval time.Duration
	// TLS, when set, makes the server accept TLS connections only (LoadTLS reads one from
	// PEM files); URI then says tls=true.
	TLS *tls.Config
	// Auth requires clients to authenticate (SCRAM-SHA-256) before any command but the
	// handshake's (auth.go). Users are created with createUser or given in Users.
	Auth bool
	// Users exist besides those createUser stored in admin.system.users, for as long as the
	// Config says so: they are not stored.
	Users []User
	// InsecureNoAuth allows listening beyond loopback without Auth; New refuses otherwise
	// (ErrNoAuthBeyondLoopback).
	InsecureNoAuth bool
}

// Server is one embedded server: a listener (package clientconn) whose connections' commands
// it runs, and one storage engine.
type Server struct {
	cfg      Config
	log      *zap.Logger
	ln       *clientconn.Listener
	addr     string
	engine   *storage.Engine
	cursors  *cursorRegistry
	sessions *sessionRegistry
	fail     *failPoints
	users    *userStore
	turns    *writeTurns
	ops      opCounters

	cmdOnce  sync.Once
	cmdTable map[string]commandSpec

	processID bson.ObjectID
	startTime time.Time
	// closing is closed when Run's context ends: commands waiting (an awaitable hello, a
	// change stream's getMore) answer at once.
	closing chan struct{}
}

// New opens the storage engine and binds the listener, so Addr and URI are known before Run.
func New(cfg Config) (*Server, error) {
	if cfg.ReplSetName == "" {
		cfg.ReplSetName = "rs0"
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:27017"
	}
	if cfg.CursorTimeout == 0 {
		cfg.CursorTimeout = 10 * time.Minute
	}
	if cfg.TTLMonitorInterval == 0 {
		cfg.TTLMonitorInterval = DefaultTTLMonitorInterval
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	// Refusals that need no socket come before storage is opened (and written to).
	users, err := configUsers(cfg.Users)
	if err != nil {
		return nil, err
	}
	if err := checkExposure(cfg, nil); err != nil {
		return nil, err
	}
	so := cfg.Storage
	so.Dir = cfg.DataDir
	so.Logger = log.Named("storage")
	engine, err := storage.Open(so)
	if err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	if err := recordStartup(engine); err != nil {
		_ = engine.Close()
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		log:       log,
		engine:    engine,
		cursors:   newCursorRegistry(),
		sessions:  newSessionRegistry(),
		fail:      newFailPoints(),
		turns:     newWriteTurns(),
		processID: bson.NewObjectID(),
		startTime: time.Now(),
		closing:   make(chan struct{}),
	}
	s.users = &userStore{engine: engine, config: users}
	var opts []clientconn.Option
	if cfg.TLS != nil {
		opts = append(opts, clientconn.WithTLS(cfg.TLS))
	}
	ln, err := clientconn.Listen(cfg.Listen, connHandler{s}, log, opts...)
	if err != nil {
		_ = engine.Close()
		return nil, err
	}
	if err := checkExposure(cfg, ln.Addr()); err != nil { // a host name, now resolved
		_ = ln.Close()
		_ = engine.Close()
		return nil, err
	}
	s.ln, s.addr = ln, advertisedAddr(ln.Addr())
	return s, nil
}

// advertisedAddr is the host:port clients should use: a wildcard listen address is advertised
// as loopback, since the hello reply's hosts must be dialable.
func advertisedAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// Addr returns the advertised host:port.
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for the official driver, with replica-set discovery.
func (s *Server) URI() string {
	uri := "mongodb://" + s.addr + "/?replicaSet=" + s.cfg.ReplSetName
	if s.cfg.TLS != nil {
		uri += "&tls=true"
	}
	return uri
}

// Engine returns the storage engine (for tests that inspect server internals).
func (s *Server) Engine() *storage.Engine { return s.engine }

// Run serves connections until ctx is done, then closes every connection and the storage
// engine. It returns nil on a clean shutdown.
func (s *Server) Run(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { close(s.closing) })
	defer stop()

	var wg sync.WaitGroup
	wg.Go(func() { s.reapCursors(ctx) })
	if s.cfg.TTLMonitorInterval > 0 {
		wg.Go(func() { s.runTTLMonitor(ctx) })
	}
	acceptErr := s.ln.Run(ctx) // returns once every connection has ended
	cancel()
	wg.Wait()
	if err := s.engine.Close(); err != nil {
		return errors.Join(acceptErr, fmt.Errorf("close storage: %w", err))
	}
	return acceptErr
}

func (s *Server) reapCursors(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.cursors.reap(now, s.cfg.CursorTimeout)
			s.sessions.reap(now, 30*time.Minute)
		}
	}
}

// recordStartup inserts a document into local.startup_log, as mongod does at every start. It
// also guarantees the oplog holds an entry at or before the start of any change stream
// opened from now on, which is what detecting lost change-stream history relies on.
func recordStartup(e *storage.Engine) error {
	host, _ := os.Hostname()
	now := time.Now()
	doc := bson.D{
		{Key: "_id", Value: fmt.Sprintf("%s-%d", host, now.UnixMilli())},
		{Key: "hostname", Value: host},
		{Key: "startTime", Value: bson.NewDateTimeFromTime(now)},
		{Key: "pid", Value: int64(os.Getpid())},
	}
	_, err := e.Write(context.Background(), func(w *storage.Writer) error {
		_, err := w.Insert("local", "startup_log", doc)
		return err
	})
	if err != nil {
		return fmt.Errorf("record startup: %w", err)
	}
	return nil
}
