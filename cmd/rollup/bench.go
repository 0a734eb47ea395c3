package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded"
)

const benchUsage = `usage: rollup bench <benchmark> [flags]

Benchmarks:
  mongod        unordered bulk upserts through the official driver on a unique
                (id, type, timestamp) index, against the embedded server (or --mongodb-uri)
  changestream  events/s one change-stream consumer drains while writers upsert, and event
                latency (write acknowledged -> event received) at a fixed write rate
  ingest        end to end: simulated agents -> HTTP API -> bulk writer -> store, against raw
                driver bulk upserts of the same documents (same fields, same indexes) in the
                same run; agents are a load generator (--client loadgen) or the agent client
                package over net/http (--client agentclient)
  baselines     rollup against the original design (upsert + $inc on every ancestor) and a
                per-tick re-aggregation: leaves/s, freshness, store commands, totals under faults

Examples:
  rollup bench mongod                       # 1,000,000 upserts, in memory
  rollup bench mongod --durable             # the same with a data directory (fsync before ack)
  rollup bench mongod --n 200000 --batch 500
  rollup bench changestream --rate 10000 --duration 5s
  rollup bench ingest --agents 10000 --leaves 10 --ticks 3
  rollup bench ingest --client agentclient  # agents through api/agentclient on the same cores
  rollup bench baselines --faults

Flags of mongod:
`

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "changestream" {
		return runBenchChangeStream(ctx, e, args[1:])
	}
	if len(args) > 0 && args[0] == "ingest" {
		return runBenchIngest(ctx, e, args[1:])
	}
	if len(args) > 0 && args[0] == "baselines" {
		return runBenchBaselines(ctx, e, args[1:])
	}
	if len(args) == 0 || args[0] != "mongod" {
		_, _ = fmt.Fprint(e.stderr, benchUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return fmt.Errorf("%w: bench needs a benchmark name (mongod, changestream, ingest, baselines)", errUsage)
	}
	fs := newFlagSet(e, "bench mongod", benchUsage)
	n := fs.Int("n", 1_000_000, "documents to upsert")
	batch := fs.Int("batch", 1000, "upserts per unordered bulk write")
	durable := fs.Bool("durable", false, "use a data directory (every write fsync'd before it is acknowledged)")
	uri := fs.String("mongodb-uri", "", "benchmark this MongoDB instead of an embedded server")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err)
	}
	if *n < 100_000 || *n%100_000 != 0 || *batch < 1 {
		return fmt.Errorf("%w: --n must be a positive multiple of 100000 and --batch positive", errUsage)
	}
	storeURI, stop, err := benchStore(ctx, *uri, *durable)
	if err != nil {
		return err
	}
	defer stop()
	res, err := benchMongod(ctx, storeURI, benchConfig{n: *n, batch: *batch, durable: *durable, uri: *uri})
	if err != nil {
		return fmt.Errorf("bench mongod: %w", err)
	}
	res.print(e.stdout)
	return nil
}

type benchConfig struct {
	n, batch int
	durable  bool
	uri      string
}

type benchResult struct {
	cfg      benchConfig
	total    time.Duration
	segments []time.Duration // time per 100k upserts
}

func (r benchResult) print(w io.Writer) {
	mode := "memory"
	if r.cfg.durable {
		mode = "durable"
	}
	if r.cfg.uri != "" {
		mode = "external MongoDB"
	}
	rate := float64(r.cfg.n) / r.total.Seconds()
	first, last := r.segments[0], r.segments[len(r.segments)-1]
	_, _ = fmt.Fprintf(w, "upserts: %d in batches of %d (%s)\n", r.cfg.n, r.cfg.batch, mode)
	_, _ = fmt.Fprintf(w, "total:   %v (%.0f upserts/s)\n", r.total.Round(time.Millisecond), rate)
	_, _ = fmt.Fprintf(w, "first 100k: %v  last 100k: %v  ratio last/first: %.2f\n",
		first.Round(time.Millisecond), last.Round(time.Millisecond), last.Seconds()/first.Seconds())
	_, _ = fmt.Fprint(w, "per 100k:")
	for _, s := range r.segments {
		_, _ = fmt.Fprintf(w, " %v", s.Round(time.Millisecond))
	}
	_, _ = fmt.Fprintln(w)
}

// benchStore returns the URI to benchmark: uri itself, or a fresh embedded server (in memory,
// or durable in a temporary directory) stopped by the returned function.
func benchStore(ctx context.Context, uri string, durable bool) (string, func(), error) {
	if uri != "" {
		return uri, func() {}, nil
	}
	var dir string
	if durable {
		d, err := os.MkdirTemp("", "rollup-bench-*")
		if err != nil {
			return "", nil, fmt.Errorf("temp dir: %w", err)
		}
		dir = d
	}
	uri, stop, err := startEmbedded(ctx, embedded.Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: zap.NewNop()})
	if err != nil {
		return "", nil, err
	}
	return uri, func() {
		stop()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}, nil
}

// startEmbedded starts an embedded server with cfg for a benchmark and returns its URI and
// the function that stops it and waits for it to end.
func startEmbedded(ctx context.Context, cfg embedded.Config) (string, func(), error) {
	srv, err := embedded.New(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("start embedded server: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	return srv.URI(), func() {
		cancel()
		<-done
	}, nil
}

// benchCountsCollection creates a fresh collection with rollup's unique key index; drop
// removes it.
func benchCountsCollection(ctx context.Context, client *mongo.Client) (*mongo.Collection, func(), error) {
	coll := client.Database("rollup_bench").Collection(fmt.Sprintf("counts_%d", time.Now().UnixNano()))
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
		Options: options.Index().SetUnique(true),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create index: %w", err)
	}
	return coll, func() { _ = coll.Drop(context.Background()) }, nil
}

func benchMongod(ctx context.Context, uri string, cfg benchConfig) (benchResult, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return benchResult{}, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	coll, drop, err := benchCountsCollection(ctx, client)
	if err != nil {
		return benchResult{}, err
	}
	defer drop()
	res := benchResult{cfg: cfg}
	ts := bson.NewDateTimeFromTime(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	models := make([]mongo.WriteModel, 0, cfg.batch)
	opts := options.BulkWrite().SetOrdered(false)
	start := time.Now()
	segStart := start
	for i := 0; i < cfg.n; {
		models = models[:0]
		for j := 0; j < cfg.batch && i < cfg.n; j++ {
			id := fmt.Sprintf("process-%07d", i)
			models = append(models, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "id", Value: id}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: ts}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "online", Value: int64(i % 500)}, {Key: "version", Value: int64(1)}}}}).
				SetUpsert(true))
			i++
		}
		if _, err := coll.BulkWrite(ctx, models, opts); err != nil {
			return benchResult{}, fmt.Errorf("bulk write: %w", err)
		}
		if i%100_000 == 0 || i == cfg.n {
			now := time.Now()
			res.segments = append(res.segments, now.Sub(segStart))
			segStart = now
		}
	}
	res.total = time.Since(start)
	return res, nil
}
