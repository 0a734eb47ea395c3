package app

import (
	"fmt"
	"net"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/watcher"
)

// Config is the configuration of serve. Its settings are named like serve's flags, and
// Validate's errors name them so (settings.Invalid).
type Config struct {
	MongoURI   string // "" starts the embedded server
	Database   string
	DataDir    string // the embedded server's data directory (unused with Demo)
	Demo       bool   // embedded server in memory, a demo project, its token and simulated agents
	DemoAgents int
	// DemoBackfill is how many past ticks the demo agents report at start
	// (DefaultDemoBackfill: three hours).
	DemoBackfill int
	// DemoAgent runs the demo's simulated agents through package agent (the code of 'rollup
	// agent': sources, on-disk spool, sender) instead of package agentsim's direct sends.
	DemoAgent      bool
	EmbeddedListen string // the embedded server's address
	// EmbeddedOplogMB is the embedded server's retained oplog in MiB (embedded.CheckOplogSizeMB).
	EmbeddedOplogMB int
	Listen          string // the HTTP address of the API, the dashboard and the metrics
	// TLSCert and TLSKey are PEM files; set, the Listen port serves HTTPS only, and a
	// certificate renewed in them is served without a restart (package certfile).
	TLSCert, TLSKey string
	// TokenRPS and TokenLeavesPerS are the per-token limits (0: off; api.Config).
	TokenRPS, TokenLeavesPerS float64
	LogLevel                  string
	// Partitions splits the watcher's work ("" = one partition; "hash:N"; "projects:a,b;c").
	Partitions    string
	LeaseTTL      time.Duration
	MaxPartitions int
	// BulkWorkers is how many leaf bulk writes are in flight at once, RecomputeWorkers how
	// many chunks of one level of parents the watcher writes at once (0: the defaults,
	// bulk.DefaultWorkers and recompute.DefaultWorkers, half the cores, 2 to 8; see
	// docs/scaling.md).
	BulkWorkers, RecomputeWorkers int
	// InstanceID names this instance in watcher leases ("" = DefaultInstanceID).
	InstanceID string
	Totals     Totals
	Retention  Retention
}

// Validate checks the settings together.
func (c Config) Validate() error {
	switch {
	case c.Demo && c.MongoURI != "":
		return settings.Invalid("mongodb-uri", "--demo runs on the embedded server: unset --mongodb-uri (or drop --demo)")
	case c.DemoAgent && !c.Demo:
		return settings.Invalid("demo-agent", "runs the --demo agents: add --demo (or drop --demo-agent)")
	case c.DemoAgents < 1:
		return settings.Invalid("demo-agents", "must be at least 1, got %d", c.DemoAgents)
	case c.DemoBackfill < 0 || c.DemoBackfill > maxDemoBackfill:
		return settings.Invalid("demo-backfill", "want 0 to %d ticks (a day), got %d", maxDemoBackfill, c.DemoBackfill)
	case c.MongoURI == "" && !c.Demo && c.DataDir == "":
		return settings.Invalid("data", "the embedded server needs a data directory (or pass --demo for an in-memory store)")
	}
	if err := mongoconn.CheckURI(c.MongoURI); err != nil {
		return settings.Invalid("mongodb-uri", "%w", err)
	}
	if c.MongoURI != "" {
		if err := bulk.CheckClientOptions(options.Client().ApplyURI(c.MongoURI)); err != nil {
			return settings.Invalid("mongodb-uri", "%w", err)
		}
	}
	if err := mongoconn.CheckDatabaseName(c.Database); err != nil {
		return settings.Invalid("database", "%w", err)
	}
	if err := settings.CheckListenAddr(c.Listen); err != nil {
		return settings.Invalid("listen", "%w", err)
	}
	switch {
	case c.TokenRPS < 0:
		return settings.Invalid("token-rps", "want 0 (no limit) or more requests per second, got %g", c.TokenRPS)
	case c.TokenLeavesPerS < 0:
		return settings.Invalid("token-leaves-per-s", "want 0 (no limit) or more counts per second, got %g", c.TokenLeavesPerS)
	case c.TLSCert != "" && c.TLSKey == "":
		return settings.Invalid("tls-cert", "the certificate needs its key: pass --tls-key too")
	case c.TLSKey != "" && c.TLSCert == "":
		return settings.Invalid("tls-key", "the key needs its certificate: pass --tls-cert too")
	}
	if c.MongoURI == "" {
		if err := settings.CheckListenAddr(c.EmbeddedListen); err != nil {
			return settings.Invalid("embedded-listen", "%w", err)
		}
		if err := checkLoopback(c.EmbeddedListen); err != nil {
			return settings.Invalid("embedded-listen", "%w", err)
		}
		if err := embedded.CheckOplogSizeMB(c.EmbeddedOplogMB); err != nil {
			return settings.Invalid("embedded-oplog-size-mb", "%w", err)
		}
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		return settings.Invalid("log-level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if _, err := watcher.ParsePartitions(c.Partitions); err != nil {
		return settings.Invalid("watcher-partitions", "%w", err)
	}
	if c.LeaseTTL < time.Second {
		return settings.Invalid("lease-ttl", "must be at least 1s, got %s", c.LeaseTTL)
	}
	if c.MaxPartitions < 0 {
		return settings.Invalid("max-partitions", "must not be negative, got %d", c.MaxPartitions)
	}
	switch {
	case c.BulkWorkers < 0 || c.BulkWorkers > MaxWorkers:
		return settings.Invalid("bulk-workers", "want 0 (the default) to %d, got %d", MaxWorkers, c.BulkWorkers)
	case c.RecomputeWorkers < 0 || c.RecomputeWorkers > MaxWorkers:
		return settings.Invalid("recompute-workers", "want 0 (the default) to %d, got %d", MaxWorkers, c.RecomputeWorkers)
	}
	if err := CheckInstanceID(c.InstanceID); err != nil {
		return settings.Invalid("instance-id", "%w", err)
	}
	if err := c.Retention.Validate(); err != nil {
		return err
	}
	return c.Totals.Validate()
}

// APILimit is an api.Config per-token limit of a setting where 0 is off (api: negative).
func APILimit(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// LogFields describe the configuration for the start-up log line: every setting that applies
// (the data directory and the embedded listen address only for the embedded store, the demo's
// only with --demo), the MongoDB URI as its hosts only.
func (c Config) LogFields() []zap.Field {
	uri := mongoconn.RedactURI(c.MongoURI)
	if uri == "" {
		uri = "(embedded)"
	}
	fields := []zap.Field{zap.String("mongodb_uri", uri), zap.String("database", c.Database)}
	switch {
	case c.Demo: // in memory: no data directory
		fields = append(fields, zap.Bool("demo", true), zap.Int("demo_agents", c.DemoAgents),
			zap.Int("demo_backfill", c.DemoBackfill), zap.Bool("demo_agent", c.DemoAgent), zap.String("embedded_listen", c.EmbeddedListen))
	case c.MongoURI == "": // the embedded store, durable in the data directory
		fields = append(fields, zap.String("data", c.DataDir), zap.String("embedded_listen", c.EmbeddedListen))
	}
	fields = append(fields, zap.String("listen", c.Listen), zap.String("tls_cert", c.TLSCert),
		zap.Float64("token_rps", c.TokenRPS), zap.Float64("token_leaves_per_s", c.TokenLeavesPerS),
		zap.String("log_level", c.LogLevel), zap.String("instance_id", c.InstanceID),
		zap.Int("bulk_workers", c.BulkWorkers), zap.Int("recompute_workers", c.RecomputeWorkers))
	return append(fields, append(c.Totals.logFields(), c.Retention.logFields()...)...)
}

// MaxWorkers bounds BulkWorkers and RecomputeWorkers.
const MaxWorkers = 64

// Bounds of the business metrics' settings.
const (
	maxTotalsGrace    = 24 * time.Hour
	maxTotalsRefresh  = time.Hour
	maxTotalsProjects = 10_000
	maxTotalsGroups   = 10_000
)

// Totals are the settings of the business metrics (package metrics/totals): the
// rollup_project_* and rollup_group_* series.
type Totals struct {
	Grace       time.Duration // a tick is complete this long after it ends (0: at once)
	Refresh     time.Duration
	MaxProjects int    // 0 turns the business metrics off
	Groups      string // projects whose groups are exported too, comma-separated, or "*"
	MaxGroups   int
}

// groupProjects returns the Groups list.
func (c Totals) groupProjects() []string {
	var out []string
	for _, p := range strings.Split(c.Groups, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate checks the settings (named like serve's --totals-* flags).
func (c Totals) Validate() error {
	switch {
	case c.Grace < 0 || c.Grace > maxTotalsGrace:
		return settings.Invalid("totals-grace", "want 0 to %s, got %s", maxTotalsGrace, c.Grace)
	case c.Refresh < time.Second || c.Refresh > maxTotalsRefresh:
		return settings.Invalid("totals-refresh", "want 1s to %s, got %s", maxTotalsRefresh, c.Refresh)
	case c.MaxProjects < 0 || c.MaxProjects > maxTotalsProjects:
		return settings.Invalid("totals-max-projects", "want 0 (off) to %d, got %d", maxTotalsProjects, c.MaxProjects)
	case c.MaxGroups < 1 || c.MaxGroups > maxTotalsGroups:
		return settings.Invalid("totals-max-groups", "want 1 to %d, got %d", maxTotalsGroups, c.MaxGroups)
	}
	for _, p := range c.groupProjects() {
		if p == totals.AllProjects {
			continue
		}
		if err := tree.ValidateName("project", p); err != nil {
			return settings.Invalid("totals-groups", `%w (want project names separated by commas, or "*")`, err)
		}
	}
	return nil
}

// Enabled says whether serve runs the business metrics.
func (c Totals) Enabled() bool { return c.MaxProjects > 0 }

// Options returns the totals.Options of the settings.
func (c Totals) Options() totals.Options {
	grace := c.Grace
	if grace == 0 {
		grace = -1 // totals.Options: negative is none, zero the default
	}
	return totals.Options{Grace: grace, Interval: c.Refresh, MaxProjects: c.MaxProjects,
		GroupProjects: c.groupProjects(), MaxGroups: c.MaxGroups}
}

// logFields describe the settings for the start-up log line.
func (c Totals) logFields() []zap.Field {
	return []zap.Field{
		zap.Duration("totals_grace", c.Grace), zap.Duration("totals_refresh", c.Refresh),
		zap.Int("totals_max_projects", c.MaxProjects), zap.String("totals_groups", c.Groups), zap.Int("totals_max_groups", c.MaxGroups),
	}
}

// Bounds of the retention settings.
const (
	minRetentionInterval = time.Second
	maxRetentionInterval = 24 * time.Hour
)

// Retention are the settings of the retention enforcer (package retention): whether this
// instance may enforce the policy, and how fast. The policy itself lives in the database
// ('rollup retention'), so every instance applies the same.
type Retention struct {
	Enabled  bool
	Interval time.Duration // between passes
	Batch    int           // documents per delete
	Rate     int           // documents deleted per second; 0: no limit
}

// Validate checks the settings (named like serve's --retention-* flags).
func (c Retention) Validate() error {
	switch {
	case c.Interval < minRetentionInterval || c.Interval > maxRetentionInterval:
		return settings.Invalid("retention-interval", "want %s to %s, got %s", minRetentionInterval, maxRetentionInterval, c.Interval)
	case c.Batch < 1 || c.Batch > retention.MaxBatch:
		return settings.Invalid("retention-batch", "want 1 to %d, got %d", retention.MaxBatch, c.Batch)
	case c.Rate < 0:
		return settings.Invalid("retention-rate", "want 0 (no limit) or more documents per second, got %d", c.Rate)
	}
	return nil
}

// Options returns the retention.Options of the settings for the instance owner.
func (c Retention) Options(owner string, tr *status.Tracker) retention.Options {
	rate := float64(c.Rate)
	if c.Rate == 0 {
		rate = retention.Unlimited
	}
	return retention.Options{Interval: c.Interval, Batch: c.Batch, Rate: rate, Owner: owner, Status: tr}
}

// logFields describe the settings for the start-up log line.
func (c Retention) logFields() []zap.Field {
	return []zap.Field{
		zap.Bool("retention", c.Enabled), zap.Duration("retention_interval", c.Interval),
		zap.Int("retention_batch", c.Batch), zap.Int("retention_rate", c.Rate),
	}
}

// checkLoopback refuses an in-process store address beyond loopback: that store has no
// authentication (rollup mongod --auth is the one to share).
func checkLoopback(addr string) error {
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("the in-process store has no authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost), got %q; to share a store run rollup mongod --auth and pass its URI with --mongodb-uri", addr)
}
