package retention_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/storage"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// capacityConfig is what BenchmarkBoundedStorage simulates, from the environment:
//
//	ROLLUP_BENCH_LEAVES     leaves of the project (default 10000; a tree of groups of 100
//	                        servers of 10 processes, rounded to whole servers)
//	ROLLUP_BENCH_DAYS       simulated days (default 4)
//	ROLLUP_BENCH_RETENTION  the policy, as 'rollup retention set' takes it, space or comma
//	                        separated (default "leaves=2h 5m=3h 1h=2d 1d=forever": every tier
//	                        levels off within the default run, and 10,000 leaves fit in
//	                        memory; "defaults" = the built-in policy, 14d 35d 400d forever)
//	ROLLUP_BENCH_OPLOG_MB   the embedded server's retained oplog bound (default its own,
//	                        storage.DefaultOplogMaxBytes, 256 MiB)
//	ROLLUP_BENCH_LATE       the late window the policy is checked against (default 10m, so
//	                        that the default's short periods are valid; the built-in policy
//	                        is valid with serve's 24h)
type capacityConfig struct {
	groups, servers, processes int
	days                       int
	policy                     retention.Policy
	limits                     retention.Limits
	spec                       string
	oplogBytes                 int64 // 0: the server's default
}

func capacityFromEnv(b *testing.B) capacityConfig {
	b.Helper()
	num := func(name string, def int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	leaves := num("ROLLUP_BENCH_LEAVES", 10_000)
	oplogMB := num("ROLLUP_BENCH_OPLOG_MB", int(storage.DefaultOplogMaxBytes>>20))
	cfg := capacityConfig{days: num("ROLLUP_BENCH_DAYS", 4), limits: retention.Limits{LateWindow: 10 * time.Minute}, oplogBytes: int64(oplogMB) << 20}
	switch {
	case leaves >= 1000:
		cfg.groups, cfg.servers, cfg.processes = leaves/1000, 100, 10
	default:
		cfg.groups, cfg.servers, cfg.processes = 1, max(1, leaves/10), 10
	}
	if v := os.Getenv("ROLLUP_BENCH_LATE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ROLLUP_BENCH_LATE=%q: %v", v, err)
		}
		cfg.limits.LateWindow = d
	}
	cfg.spec = os.Getenv("ROLLUP_BENCH_RETENTION")
	if cfg.spec == "" {
		cfg.spec = "leaves=2h 5m=3h 1h=2d 1d=forever"
	}
	cfg.policy = retention.Defaults()
	if cfg.spec != "defaults" {
		ov, err := retention.ParseAssignments(strings.Fields(strings.ReplaceAll(cfg.spec, ",", " ")))
		if err != nil {
			b.Fatalf("ROLLUP_BENCH_RETENTION: %v", err)
		}
		for t, p := range ov {
			cfg.policy = cfg.policy.With(t, p)
		}
	}
	if err := cfg.policy.Validate(capacityProject, cfg.limits); err != nil {
		b.Fatalf("ROLLUP_BENCH_RETENTION: %v", err)
	}
	return cfg
}

func (c capacityConfig) leaves() int { return c.groups * c.servers * c.processes }

// capacityProject is the simulated project's name.
const capacityProject = "capacity"

// BenchmarkBoundedStorage simulates days of a project on a durable embedded server with an
// accelerated clock: every 5-minute tick, one document per leaf (the fields the ingest
// writes) and one per parent and root (the watcher's documents, children included); every
// hour and every UTC day a summary per parent and root (the #14 tiers' documents: id, type,
// project, timestamp and the aggregates); at the end of each simulated hour a retention pass
// (the real Enforcer, its clock the simulated one). It logs, day by day, the documents of
// each tier, the bytes of the data directory and the heap (the in-process server's memory),
// and reports at the end the documents per leaf per day and the bytes per document of each
// tier (BSON, measured), the documents stored, the data directory's size and the heap. The
// documents are inserted directly, not through the API and the watcher: what is measured is what is stored and what retention
// deletes, not the ingest. Numbers go to docs/capacity.md and docs/benchmarks.md.
//
// It fails when a tier kept for a finite period still grows once the period has passed.
func BenchmarkBoundedStorage(b *testing.B) {
	cfg := capacityFromEnv(b)
	for range b.N {
		simulateCapacity(b, cfg)
	}
}

// capacityTier is a tier's documents in the simulation.
type capacityTier struct {
	docs     int64 // stored now
	inserted int64 // ever
	bytes    int64 // BSON bytes of the sampled documents
	sampled  int64
	series   []int64
}

func simulateCapacity(b *testing.B, cfg capacityConfig) {
	dir := b.TempDir()
	s := embeddedtest.Start(b, embeddedtest.Options{DataDir: dir, Configure: func(c *embedded.Config) {
		c.Logger = zap.NewNop()
		c.Storage.OplogMaxBytes = cfg.oplogBytes
	}})
	c := s.Client(b)
	db := s.Database(b, c)
	ctx := context.Background()
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, coll := range []string{store.HourlyCollection, store.DailyCollection} {
		if _, err := db.Collection(coll).Indexes().CreateMany(ctx, []mongo.IndexModel{
			{Keys: bson.D{{Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1}, {Key: store.FieldTimestamp, Value: 1}}, Options: options.Index().SetUnique(true)},
			{Keys: bson.D{{Key: store.FieldProject, Value: 1}, {Key: store.FieldTimestamp, Value: 1}}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.Collection(store.ProjectsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: capacityProject}, {Key: store.FieldCreatedAt, Value: start}}); err != nil {
		b.Fatal(err)
	}
	ov := retention.Override{}
	for _, t := range store.Tiers() {
		ov[t] = cfg.policy.Of(t)
	}
	if err := retention.NewStore(db).Save(ctx, retention.DefaultScope, ov, start); err != nil {
		b.Fatal(err)
	}
	now := start
	enf := retention.New(db, retention.Options{Limits: cfg.limits, Now: func() time.Time { return now }, Rate: retention.Unlimited}, zap.NewNop())

	nodes := tree.Generate(capacityProject, cfg.groups, cfg.servers, cfg.processes)
	tr, err := tree.Build(capacityProject, nodes)
	if err != nil {
		b.Fatal(err)
	}
	var parents []tree.Node
	children := map[string][]tree.Node{}
	for _, n := range nodes {
		if n.Parent != "" {
			children[n.Parent] = append(children[n.Parent], n)
		}
	}
	for _, n := range nodes {
		if len(children[n.ID]) > 0 {
			parents = append(parents, n)
		}
	}
	leaves := tr.Leaves()
	b.Logf("simulating %d days of project %q: %d leaves, %d parents and root; retention %s (late window %s); oplog bound %d MiB; data directory %s",
		cfg.days, capacityProject, len(leaves), len(parents), cfg.spec, cfg.limits.LateWindow, cfg.oplogBytes>>20, dir)

	tiers := map[store.Tier]*capacityTier{}
	for _, t := range store.Tiers() {
		tiers[t] = &capacityTier{}
	}
	insert := func(coll string, t store.Tier, docs []any) {
		if len(docs) == 0 {
			return
		}
		if _, err := db.Collection(coll).InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
			b.Fatalf("insert %d documents of tier %s: %v", len(docs), t, err)
		}
		ct := tiers[t]
		ct.docs += int64(len(docs))
		ct.inserted += int64(len(docs))
		if ct.sampled < 10_000 { // the documents of a tier differ only in their values
			for _, d := range docs {
				raw, err := bson.Marshal(d)
				if err != nil {
					b.Fatal(err)
				}
				ct.bytes += int64(len(raw)) + 17 // + the _id element the driver adds (an ObjectID)
				ct.sampled++
			}
		}
	}
	// progress logs a line at once on stderr (b.Logf shows them only when the benchmark ends)
	// and again in the benchmark's log.
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "BenchmarkBoundedStorage: "+format+"\n", args...)
		b.Logf(format, args...)
	}
	var dirBytes []int64
	var heap []uint64
	var peaks []int64 // the data directory's largest size of each day
	began := time.Now()
	b.ResetTimer()
	for day := range cfg.days {
		dayStart := start.Add(time.Duration(day) * 24 * time.Hour)
		var deletedToday int64
		var passTime time.Duration
		dayMin, dayMax := int64(math.MaxInt64), int64(0) // the data directory after each pass
		for tick := dayStart; tick.Before(dayStart.Add(24 * time.Hour)); tick = tick.Add(tree.DefaultTick) {
			leafDocs := make([]any, 0, len(leaves))
			for i, l := range leaves {
				leafDocs = append(leafDocs, bson.D{
					{Key: store.FieldID, Value: l.ID}, {Key: store.FieldType, Value: l.Type},
					{Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(tick)},
					{Key: store.FieldOnline, Value: int64(50 + (i+tick.Minute())%150)},
					{Key: store.FieldVersion, Value: tick.UnixMilli()},
					{Key: store.FieldProject, Value: capacityProject},
					{Key: store.FieldSubmissionID, Value: fmt.Sprintf("%016x", tick.Unix()*7919+int64(i))},
					{Key: store.FieldWrittenAt, Value: bson.NewDateTimeFromTime(tick.Add(20 * time.Second))},
				})
			}
			insert(store.CountsCollection, store.TierLeaves, leafDocs)
			insert(store.CountsCollection, store.Tier5m, parentDocs(parents, children, tick))
			next := tick.Add(tree.DefaultTick)
			if !next.Equal(next.Truncate(time.Hour)) {
				continue
			}
			// The hour is over: its summaries, the day's at its end, then a retention pass
			// (one per simulated hour, as serve's every minute is to a real day).
			insert(store.HourlyCollection, store.Tier1h, summaryDocs(parents, children, tick.Truncate(time.Hour)))
			if next.Equal(next.Truncate(24 * time.Hour)) {
				insert(store.DailyCollection, store.Tier1d, summaryDocs(parents, children, dayStart))
			}
			now = next
			rep, err := enf.Pass(ctx)
			if err != nil {
				b.Fatalf("retention pass at %s: %v", now.Format(time.RFC3339), err)
			}
			for _, t := range store.Tiers() {
				tiers[t].docs -= rep.Deleted[t]
				deletedToday += rep.Deleted[t]
			}
			passTime += rep.Took
			sz := dirSize(b, dir)
			dayMin, dayMax = min(dayMin, sz), max(dayMax, sz)
		}
		var line strings.Builder
		var total int64
		for _, t := range store.Tiers() {
			tiers[t].series = append(tiers[t].series, tiers[t].docs)
			total += tiers[t].docs
			fmt.Fprintf(&line, " %s=%d", t, tiers[t].docs)
		}
		dirBytes = append(dirBytes, dirSize(b, dir))
		// The embedded server keeps every live document in memory: the heap after a
		// collection is its memory (the simulation's own is a tick's documents).
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapAlloc)
		peaks = append(peaks, dayMax)
		progress("day %3d: documents %d (%s); data directory %.1f MiB (%.0f–%.0f after the day's passes); heap %.0f MiB; 24 passes deleted %d in %s; %s elapsed",
			day+1, total, strings.TrimSpace(line.String()), float64(dirBytes[day])/(1<<20), float64(dayMin)/(1<<20), float64(dayMax)/(1<<20),
			float64(ms.HeapAlloc)/(1<<20), deletedToday, passTime.Round(time.Millisecond), time.Since(began).Round(time.Second))
	}
	b.StopTimer()

	// The stored counts agree with the store.
	for _, t := range store.Tiers() {
		var n int64
		switch t {
		case store.TierLeaves, store.Tier5m:
			f := bson.D{{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}}
			if t == store.Tier5m {
				f = bson.D{{Key: store.FieldRollup, Value: true}}
			}
			n, err = db.Collection(store.CountsCollection).CountDocuments(ctx, f)
		case store.Tier1h:
			n, err = db.Collection(store.HourlyCollection).CountDocuments(ctx, bson.D{})
		default:
			n, err = db.Collection(store.DailyCollection).CountDocuments(ctx, bson.D{})
		}
		if err != nil || n != tiers[t].docs {
			b.Errorf("tier %s: %d documents stored (%v), the simulation counted %d", t, n, err, tiers[t].docs)
		}
	}
	// A tier kept for a finite period stops changing once its period has passed: from then
	// on, its count at the end of each day (after that hour's pass) is the same.
	perLeafDay := func(n int64) float64 { return float64(n) / float64(cfg.leaves()) / float64(cfg.days) }
	for _, t := range store.Tiers() {
		ct := tiers[t]
		b.ReportMetric(perLeafDay(ct.inserted), "docs/leaf/day-"+string(t))
		b.ReportMetric(float64(ct.bytes)/float64(ct.sampled), "B/doc-"+string(t))
		b.ReportMetric(float64(ct.docs), "docs-"+string(t))
		p := cfg.policy.Of(t)
		if p == retention.Forever {
			continue
		}
		settled := int(time.Duration(p).Hours()/24) + 1 // the first day whose end count is final (1-based)
		if settled >= cfg.days {
			b.Logf("tier %s: %d days is too short a run to see it level off (kept %s)", t, cfg.days, p)
			continue
		}
		for d := settled; d < cfg.days; d++ {
			if ct.series[d] != ct.series[settled-1] {
				b.Errorf("tier %s still changes after its period: %v documents at the end of each day", t, ct.series)
				break
			}
		}
	}
	last := dirBytes[len(dirBytes)-1]
	peak := int64(0)
	for _, v := range peaks {
		peak = max(peak, v)
	}
	b.ReportMetric(float64(last)/(1<<20), "MiB-dir-end")
	b.ReportMetric(float64(heap[len(heap)-1])/(1<<20), "MiB-heap-end")
	b.ReportMetric(float64(peak)/(1<<20), "MiB-dir-peak")
	var mib, peakMiB []string
	for i, v := range dirBytes {
		mib = append(mib, fmt.Sprintf("%.0f", float64(v)/(1<<20)))
		peakMiB = append(peakMiB, fmt.Sprintf("%.0f", float64(peaks[i])/(1<<20)))
	}
	b.Logf("data directory, MiB at the end of each day: %s", strings.Join(mib, " "))
	b.Logf("data directory, largest MiB of each day: %s", strings.Join(peakMiB, " "))
}

// parentDocs are the watcher's documents of every parent and root at tick: every child
// reported (online, version, reported = expected = its leaves).
func parentDocs(parents []tree.Node, children map[string][]tree.Node, tick time.Time) []any {
	out := make([]any, 0, len(parents))
	for _, p := range parents {
		out = append(out, store.ParentFields(parentAt(p, children, tick), tick.Add(30*time.Second)))
	}
	return out
}

// parentAt is p's rollup at tick: every leaf under it reported, online 100 each.
func parentAt(p tree.Node, children map[string][]tree.Node, tick time.Time) rollup.Parent {
	par := rollup.Parent{ID: p.ID, Type: p.Type, Project: capacityProject, Timestamp: tick, Rev: tick.UnixMilli(),
		Children: map[string]rollup.ChildState{}, TreeVersion: 1}
	for _, c := range children[p.ID] {
		n := leavesUnder(c, children)
		st := rollup.ChildState{Type: c.Type, Online: 100 * n, Version: tick.UnixMilli(), Reported: n, Expected: n}
		par.Children[c.ID] = st
		par.Online += st.Online
		par.Reported += n
		par.Expected += n
	}
	return par
}

func leavesUnder(n tree.Node, children map[string][]tree.Node) int64 {
	if len(children[n.ID]) == 0 {
		return 1
	}
	var total int64
	for _, c := range children[n.ID] {
		total += leavesUnder(c, children)
	}
	return total
}

// summaryDocs are an hourly or daily summary of every parent and root for the bucket: the
// fields the #14 contract gives and the aggregates its tiers keep (max, min, sum and count of
// ticks, last, reported and expected summed), as int64s.
func summaryDocs(parents []tree.Node, children map[string][]tree.Node, bucket time.Time) []any {
	out := make([]any, 0, len(parents))
	for _, p := range parents {
		n := leavesUnder(p, children)
		out = append(out, bson.D{
			{Key: store.FieldID, Value: p.ID}, {Key: store.FieldType, Value: p.Type},
			{Key: store.FieldProject, Value: capacityProject}, {Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(bucket)},
			{Key: "max", Value: 100 * n}, {Key: "min", Value: 90 * n}, {Key: "sum", Value: 1140 * n}, {Key: "count", Value: int64(12)},
			{Key: "last", Value: 95 * n}, {Key: store.FieldReported, Value: 12 * n}, {Key: store.FieldExpected, Value: 12 * n},
			{Key: store.FieldVersion, Value: bucket.UnixMilli()}, {Key: store.FieldWrittenAt, Value: bson.NewDateTimeFromTime(bucket)},
		})
	}
	return out
}

// dirSize is the bytes of the files under dir.
func dirSize(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && !d.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}
