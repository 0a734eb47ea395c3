package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ChangeStreamConfig is the shape of the change-stream benchmark.
type ChangeStreamConfig struct {
	Backlog  int           // events written before the consumer starts reading (throughput)
	Rate     int           // writes/s during the latency phase
	Duration time.Duration // length of the latency phase
	URI      string        // benchmark this MongoDB instead of an embedded server
}

// Validate checks the shape.
func (c ChangeStreamConfig) Validate() error {
	if c.Backlog < 1000 || c.Rate < 100 || c.Duration <= 0 {
		return errors.New("--backlog >= 1000, --rate >= 100 and a positive --duration are required")
	}
	return nil
}

// ChangeStreamResult is the change-stream benchmark's measurement.
type ChangeStreamResult struct {
	cfg       ChangeStreamConfig
	events    int
	drainTime time.Duration
	latencies []time.Duration
}

// ChangeStream measures the events/s one change-stream consumer drains while writers upsert,
// and the latency from a write's acknowledgement to its event at a fixed write rate, against
// a fresh embedded server (or cfg.URI).
func ChangeStream(ctx context.Context, cfg ChangeStreamConfig) (ChangeStreamResult, error) {
	uri, stop, err := benchStore(ctx, cfg.URI, false)
	if err != nil {
		return ChangeStreamResult{cfg: cfg}, err
	}
	defer stop()
	return benchChangeStream(ctx, uri, cfg)
}

// Print writes the result as the command prints it.
func (r ChangeStreamResult) Print(w io.Writer) {
	_, _ = fmt.Fprintf(w, "throughput: %d events drained in %v while writers upsert = %.0f events/s\n",
		r.events, r.drainTime.Round(time.Millisecond), float64(r.events)/r.drainTime.Seconds())
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	if len(lat) == 0 {
		_, _ = fmt.Fprintln(w, "latency: no events")
		return
	}
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	_, _ = fmt.Fprintf(w, "latency (write acknowledged -> event received) at %d writes/s over %v: p50 %v  p99 %v  max %v (%d events)\n",
		r.cfg.Rate, r.cfg.Duration, pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond),
		lat[len(lat)-1].Round(10*time.Microsecond), len(lat))
}

func benchChangeStream(ctx context.Context, uri string, cfg ChangeStreamConfig) (ChangeStreamResult, error) {
	res := ChangeStreamResult{cfg: cfg}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	coll, drop, err := benchCountsCollection(ctx, client)
	if err != nil {
		return res, err
	}
	defer drop()

	// Throughput: a backlog of upserts is waiting when the consumer starts; writers go on
	// upserting while it drains.
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetBatchSize(5000))
	if err != nil {
		return res, fmt.Errorf("watch: %w", err)
	}
	defer func() { _ = cs.Close(context.Background()) }()
	if err := upsertRange(ctx, coll, "backlog", 0, cfg.Backlog, 1000); err != nil {
		return res, err
	}
	wctx, stopWriters := context.WithCancel(ctx)
	g := pool.New().WithErrors()
	g.Go(func() error {
		for i := 0; wctx.Err() == nil; i += 1000 {
			if err := upsertRange(wctx, coll, "concurrent", i, i+1000, 1000); err != nil && wctx.Err() == nil {
				return err
			}
		}
		return nil
	})
	start := time.Now()
	for res.events < cfg.Backlog {
		if !cs.Next(ctx) {
			stopWriters()
			_ = g.Wait()
			return res, fmt.Errorf("change stream: %w", cs.Err())
		}
		if _, err := cs.Current.LookupErr("documentKey", "_id"); err != nil {
			stopWriters()
			_ = g.Wait()
			return res, fmt.Errorf("event without documentKey: %w", err)
		}
		res.events++
	}
	res.drainTime = time.Since(start)
	stopWriters()
	if err := g.Wait(); err != nil {
		return res, err
	}
	_ = cs.Close(ctx)

	// A fresh collection: a cancelled writer's last batch may still land on the first one.
	latColl, dropLat, err := benchCountsCollection(ctx, client)
	if err != nil {
		return res, err
	}
	defer dropLat()
	lat, err := measureLatency(ctx, latColl, cfg)
	res.latencies = lat
	return res, err
}

// measureLatency writes at cfg.Rate (batches of rate/100 every 10 ms) and measures, for each
// event, the time from its batch's acknowledgement to its arrival at the consumer.
func measureLatency(ctx context.Context, coll *mongo.Collection, cfg ChangeStreamConfig) ([]time.Duration, error) {
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	defer func() { _ = cs.Close(context.Background()) }()
	perBatch := max(1, cfg.Rate/100)
	batches := int(cfg.Duration / (10 * time.Millisecond))
	var mu sync.Mutex
	acked := make([]time.Time, batches)
	received := make([][]time.Time, batches)

	g := pool.New().WithErrors()
	g.Go(func() error {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for b := range batches {
			<-tick.C
			if err := upsertRange(ctx, coll, "lat"+strconv.Itoa(b), 0, perBatch, perBatch); err != nil {
				return err
			}
			mu.Lock()
			acked[b] = time.Now()
			mu.Unlock()
		}
		return nil
	})
	want := batches * perBatch
	for got := 0; got < want; got++ {
		if !cs.Next(ctx) {
			_ = g.Wait()
			return nil, fmt.Errorf("change stream: %w", cs.Err())
		}
		now := time.Now()
		id, _ := cs.Current.Lookup("fullDocument", "id").StringValueOK()
		b, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(id, "-", 2)[0], "lat"))
		if err != nil || b < 0 || b >= batches {
			return nil, fmt.Errorf("unexpected event for %q", id)
		}
		received[b] = append(received[b], now)
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for b, times := range received {
		for _, t := range times {
			lat = append(lat, max(0, t.Sub(acked[b])))
		}
	}
	return lat, nil
}

// upsertRange upserts documents prefix-from … prefix-(to-1) in unordered batches.
func upsertRange(ctx context.Context, coll *mongo.Collection, prefix string, from, to, batch int) error {
	ts := bson.NewDateTimeFromTime(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	models := make([]mongo.WriteModel, 0, batch)
	for i := from; i < to; {
		models = models[:0]
		for j := 0; j < batch && i < to; j++ {
			models = append(models, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "id", Value: prefix + "-" + strconv.Itoa(i)}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: ts}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "online", Value: int64(i % 500)}, {Key: "version", Value: int64(1)}}}}).
				SetUpsert(true))
			i++
		}
		if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
			return fmt.Errorf("bulk write: %w", err)
		}
	}
	return nil
}
