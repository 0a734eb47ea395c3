package bench

import (
	"context"
	"errors"
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

// MongodConfig is the shape of the mongod benchmark.
type MongodConfig struct {
	N       int    // upserts, a multiple of 100,000
	Batch   int    // upserts per unordered bulk write
	Durable bool   // the embedded server keeps a data directory (fsync before every acknowledgement)
	URI     string // benchmark this MongoDB instead of an embedded server
}

// Validate checks the shape.
func (c MongodConfig) Validate() error {
	if c.N < 100_000 || c.N%100_000 != 0 || c.Batch < 1 {
		return errors.New("--n must be a positive multiple of 100000 and --batch positive")
	}
	return nil
}

// MongodResult is the mongod benchmark's measurement.
type MongodResult struct {
	cfg      MongodConfig
	total    time.Duration
	segments []time.Duration // time per 100k upserts
}

// Mongod upserts cfg.N documents in unordered bulk writes of cfg.Batch through the official
// driver on a unique (id, type, timestamp) index, against a fresh embedded server (or cfg.URI).
func Mongod(ctx context.Context, cfg MongodConfig) (MongodResult, error) {
	uri, stop, err := benchStore(ctx, cfg.URI, cfg.Durable)
	if err != nil {
		return MongodResult{}, err
	}
	defer stop()
	return benchMongod(ctx, uri, cfg)
}

// Print writes the result as the command prints it.
func (r MongodResult) Print(w io.Writer) {
	mode := "memory"
	if r.cfg.Durable {
		mode = "durable"
	}
	if r.cfg.URI != "" {
		mode = "external MongoDB"
	}
	rate := float64(r.cfg.N) / r.total.Seconds()
	first, last := r.segments[0], r.segments[len(r.segments)-1]
	_, _ = fmt.Fprintf(w, "upserts: %d in batches of %d (%s)\n", r.cfg.N, r.cfg.Batch, mode)
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

func benchMongod(ctx context.Context, uri string, cfg MongodConfig) (MongodResult, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return MongodResult{}, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	coll, drop, err := benchCountsCollection(ctx, client)
	if err != nil {
		return MongodResult{}, err
	}
	defer drop()
	res := MongodResult{cfg: cfg}
	ts := bson.NewDateTimeFromTime(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	models := make([]mongo.WriteModel, 0, cfg.Batch)
	opts := options.BulkWrite().SetOrdered(false)
	start := time.Now()
	segStart := start
	for i := 0; i < cfg.N; {
		models = models[:0]
		for j := 0; j < cfg.Batch && i < cfg.N; j++ {
			id := fmt.Sprintf("process-%07d", i)
			models = append(models, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "id", Value: id}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: ts}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "online", Value: int64(i % 500)}, {Key: "version", Value: int64(1)}}}}).
				SetUpsert(true))
			i++
		}
		if _, err := coll.BulkWrite(ctx, models, opts); err != nil {
			return MongodResult{}, fmt.Errorf("bulk write: %w", err)
		}
		if i%100_000 == 0 || i == cfg.N {
			now := time.Now()
			res.segments = append(res.segments, now.Sub(segStart))
			segStart = now
		}
	}
	res.total = time.Since(start)
	return res, nil
}
