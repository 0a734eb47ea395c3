package bench

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestRawUpsertsFilter: the raw path's plain filter writes over a parent's document at a
// leaf's key (it has no guard), the guarded one is rollup's filter and refuses it (E11000 on
// the unique key, the parent unchanged); both write every other leaf with the same fields.
func TestRawUpsertsFilter(t *testing.T) {
	store := embeddedtest.Start(t)
	client := store.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	leaves := []agentsim.Leaf{{ID: "p-0", Type: "process"}, {ID: "p-1", Type: "process"}, {ID: "p-2", Type: "process"}}
	for _, tc := range []struct {
		guarded       bool
		parentWritten bool
	}{{false, true}, {true, false}} {
		coll := client.Database("bench_raw_filter").Collection("raw_guarded_" + map[bool]string{false: "no", true: "yes"}[tc.guarded])
		t.Cleanup(func() { _ = coll.Drop(context.Background()) })
		if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
			Options: options.Index().SetUnique(true),
		}); err != nil {
			t.Fatal(err)
		}
		// A parent's document under the first leaf's key (an interior node reported as a leaf), of
		// an older version than the leaves': only the rollup guard keeps it.
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "id", Value: "p-0"}, {Key: "type", Value: "process"},
			{Key: "timestamp", Value: bson.NewDateTimeFromTime(tick)}, {Key: "rollup", Value: true}, {Key: "online", Value: int64(-1)}, {Key: "version", Value: int64(0)}}); err != nil {
			t.Fatal(err)
		}
		err := rawUpserts(ctx, coll, leaves, tick, tick.Add(time.Minute), tc.guarded)
		if tc.parentWritten != (err == nil) {
			t.Fatalf("guarded=%t: rawUpserts error %v, want an error only with the guard", tc.guarded, err)
		}
		var parent struct {
			Online int64 `bson:"online"`
		}
		if err := coll.FindOne(ctx, bson.D{{Key: "id", Value: "p-0"}}).Decode(&parent); err != nil {
			t.Fatal(err)
		}
		if written := parent.Online != -1; written != tc.parentWritten {
			t.Errorf("guarded=%t: parent's online %d, overwritten %t, want %t", tc.guarded, parent.Online, written, tc.parentWritten)
		}
		for _, l := range leaves[1:] {
			var doc bson.M
			if err := coll.FindOne(ctx, bson.D{{Key: "id", Value: l.ID}}).Decode(&doc); err != nil {
				t.Fatalf("guarded=%t: leaf %s: %v", tc.guarded, l.ID, err)
			}
			for _, f := range []string{"online", "version", "project", "submission_id", "written_at"} {
				if _, ok := doc[f]; !ok {
					t.Errorf("guarded=%t: leaf %s lacks %s: %v", tc.guarded, l.ID, f, doc)
				}
			}
		}
	}
}

// TestMeasureIngestTicksWarmup: warm-up ticks run both paths at their own earlier tick times
// and are not reported; the measured ticks keep their order (ingest first in the first one,
// then alternating), and only they are profiled.
func TestMeasureIngestTicksWarmup(t *testing.T) {
	proxy := blackpipe.New("127.0.0.1:1", zap.NewNop())
	var calls []string
	var ticks []time.Time
	prepare := func(tick, _ time.Time) (func() (sendStats, error), error) {
		return func() (sendStats, error) {
			calls, ticks = append(calls, "ingest"), append(ticks, tick)
			return sendStats{}, nil
		}, nil
	}
	raw := func(tick, _ time.Time) error {
		calls, ticks = append(calls, "raw"), append(ticks, tick)
		return nil
	}
	prefix := filepath.Join(t.TempDir(), "ph")
	out, err := measureIngestTicks(2, proxy, prepare, raw, 7, 1, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].leaves != 7 || out[1].leaves != 7 {
		t.Fatalf("reported %d ticks (%+v), want 2 of 7 leaves", len(out), out)
	}
	// warm-up (index -1: raw first), tick 1 (ingest first), tick 2 (raw first)
	if want := []string{"raw", "ingest", "ingest", "raw", "raw", "ingest"}; !slices.Equal(calls, want) {
		t.Errorf("phases %v, want %v", calls, want)
	}
	for i := 0; i+2 < len(ticks); i += 2 {
		if ticks[i] != ticks[i+1] || !ticks[i+2].After(ticks[i]) {
			t.Errorf("tick times %v: each tick's two phases at one time, later ticks later", ticks)
		}
	}
	files, _ := filepath.Glob(prefix + ".*")
	slices.Sort(files)
	if want := []string{prefix + ".ingest.1", prefix + ".ingest.2", prefix + ".raw.1", prefix + ".raw.2"}; !slices.Equal(files, want) {
		t.Errorf("profiles %v, want %v (none of the warm-up)", files, want)
	}
}
