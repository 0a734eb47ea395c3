package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// Where the time goes between the last leaf and the roots, read from the stored documents
// alone (so it holds whatever serve's internals become): every document carries written_at,
// the writer's clock when it built the write (the bulk writer for leaves, the watcher for
// parents; milliseconds). After a tick, the timeline reads the newest leaf write of the tick
// and every parent write of the tick, and reports, relative to that last leaf, when the
// parents of each level were last written, and how many of them were written after it (the
// final burst). The gap before the first parent write after the last leaf is the change
// stream's delivery plus the watcher's wait for the burst to end (an empty getMore after
// MaxAwait, or MaxBurstDelay) plus the read of the first chunk of parents; each level after
// that is one find and one BulkWrite per chunk of parents.

// tickTimeline is one tick's timeline.
type tickTimeline struct {
	lastLeaf time.Time
	// levels are the parent types, deepest first, with the time of their last write after
	// lastLeaf and how many documents were written after it.
	levels []levelWrites
	// firstParent is the first parent write after lastLeaf.
	firstParent time.Time
	ok          bool
}

type levelWrites struct {
	typ   string
	depth int
	last  time.Time
	after int
}

// readTimeline builds the timeline of tick for projects. Leaves are the documents of the tick
// without the rollup field.
func readTimeline(ctx context.Context, coll *mongo.Collection, projects []*scaleProject, tick time.Time) (tickTimeline, error) {
	var tl tickTimeline
	names := make(bson.A, len(projects))
	depthOf := map[string]int{}
	for i, pr := range projects {
		names[i] = pr.name
		for _, lv := range pr.tree.Levels()[1:] { // parents, deepest first
			for _, n := range lv[:1] {
				depthOf[n.Type] = pr.tree.Depth(n.ID)
			}
		}
	}
	// The newest leaf write: the written_at index read backwards from the newest write,
	// skipping the parents written after it.
	cur, err := coll.Find(ctx, bson.D{
		{Key: store.FieldTimestamp, Value: tick},
		{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
		{Key: store.FieldProject, Value: bson.D{{Key: "$in", Value: names}}},
	}, options.Find().SetSort(bson.D{{Key: store.FieldWrittenAt, Value: -1}}).SetLimit(1).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: store.FieldWrittenAt, Value: 1}}))
	if err != nil {
		return tl, fmt.Errorf("timeline: %w", err)
	}
	if cur.Next(ctx) {
		if ms, ok := cur.Current.Lookup(store.FieldWrittenAt).DateTimeOK(); ok {
			tl.lastLeaf = time.UnixMilli(ms)
		}
	}
	err = cur.Err()
	_ = cur.Close(ctx)
	if err != nil || tl.lastLeaf.IsZero() {
		return tl, err
	}
	cur, err = coll.Find(ctx, bson.D{
		{Key: store.FieldProject, Value: bson.D{{Key: "$in", Value: names}}},
		{Key: store.FieldTimestamp, Value: tick},
		{Key: store.FieldRollup, Value: true},
	}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: store.FieldType, Value: 1}, {Key: store.FieldWrittenAt, Value: 1}}))
	if err != nil {
		return tl, fmt.Errorf("timeline: %w", err)
	}
	byType := map[string]*levelWrites{}
	for cur.Next(ctx) {
		typ, _ := cur.Current.Lookup(store.FieldType).StringValueOK()
		ms, ok := cur.Current.Lookup(store.FieldWrittenAt).DateTimeOK()
		if !ok {
			continue
		}
		at := time.UnixMilli(ms)
		lw := byType[typ]
		if lw == nil {
			lw = &levelWrites{typ: typ, depth: depthOf[typ]}
			byType[typ] = lw
		}
		if at.Before(tl.lastLeaf) {
			continue
		}
		lw.after++
		if at.After(lw.last) {
			lw.last = at
		}
		if tl.firstParent.IsZero() || at.Before(tl.firstParent) {
			tl.firstParent = at
		}
	}
	err = cur.Err()
	_ = cur.Close(ctx)
	if err != nil {
		return tl, fmt.Errorf("timeline: %w", err)
	}
	for _, lw := range byType {
		tl.levels = append(tl.levels, *lw)
	}
	slices.SortFunc(tl.levels, func(a, b levelWrites) int { return b.depth - a.depth })
	tl.ok = !tl.firstParent.IsZero()
	return tl, nil
}

// String describes the timeline relative to the last leaf write.
func (tl tickTimeline) String() string {
	if !tl.ok {
		return "no parent written after the last leaf"
	}
	ms := func(t time.Time) string { return fmt.Sprintf("+%d", t.Sub(tl.lastLeaf).Milliseconds()) }
	parts := []string{"first parent write " + ms(tl.firstParent)}
	for _, lw := range tl.levels {
		if lw.after > 0 {
			parts = append(parts, fmt.Sprintf("%s done %s (%d written)", lw.typ, ms(lw.last), lw.after))
		}
	}
	return strings.Join(parts, ", ") + " ms"
}
