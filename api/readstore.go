package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// span is a run of ticks [from, to) that share one tree version; tree is nil when no version
// is effective there.
type span struct {
	from, to time.Time
	version  int
	tree     *tree.Tree
}

// spans splits [from, to) by the tree version effective at each tick (the one with the
// largest effective_from <= tick, the larger version on a tie, as treedb.Store.VersionAt) and
// loads each span's tree. There is at least one span.
func (rd *reader) spans(ctx context.Context, project string, from, to time.Time) ([]span, error) {
	vs, err := rd.trees.Versions(ctx, project)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(vs, func(a, b treedb.Version) int {
		if c := a.EffectiveFrom.Compare(b.EffectiveFrom); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	cur := -1 // index in vs of the version effective at start
	i := 0
	for ; i < len(vs) && !vs[i].EffectiveFrom.After(from); i++ {
		cur = i
	}
	var out []span
	start := from
	for ; i < len(vs) && vs[i].EffectiveFrom.Before(to); i++ {
		if vs[i].EffectiveFrom.After(start) {
			out = append(out, span{from: start, to: vs[i].EffectiveFrom, version: versionOf(vs, cur)})
			start = vs[i].EffectiveFrom
		}
		cur = i
	}
	out = append(out, span{from: start, to: to, version: versionOf(vs, cur)})
	for k := range out {
		if out[k].version == 0 {
			continue
		}
		if out[k].tree, err = rd.trees.Load(ctx, project, out[k].version); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func versionOf(vs []treedb.Version, i int) int {
	if i < 0 {
		return 0
	}
	return vs[i].Version
}

// errBadDoc marks a stored document the read API cannot use (a *store.InvalidDocError).
var errBadDoc = errors.New("malformed counts document")

// counts is the counts collection.
func (rd *reader) counts() *mongo.Collection { return rd.db.Collection(store.CountsCollection) }

// find runs filter on counts (projected by store.NodeProjection) and calls fn with each document.
func (rd *reader) find(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder, fn func(store.Node)) error {
	cur, err := rd.counts().Find(ctx, filter, opts.SetProjection(store.NodeProjection))
	if err != nil {
		return fmt.Errorf("find counts: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		d, err := store.DecodeNode(cur.Current)
		if err != nil {
			return fmt.Errorf("%w: %w", errBadDoc, err)
		}
		fn(d)
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read counts: %w", err)
	}
	return nil
}

// nodeDocs calls fn with project's documents of node (id, typ) in [from, to), in time order.
// It reads only the unique {id, type, timestamp} index's range; a document of another project
// under the key (an orphan it wrote before the id joined this tree) is not this project's.
func (rd *reader) nodeDocs(ctx context.Context, project, id, typ string, from, to time.Time, fn func(store.Node)) error {
	filter := bson.D{
		{Key: store.FieldID, Value: id},
		{Key: store.FieldType, Value: typ},
		{Key: store.FieldTimestamp, Value: bson.D{
			{Key: "$gte", Value: bson.NewDateTimeFromTime(from)},
			{Key: "$lt", Value: bson.NewDateTimeFromTime(to)},
		}},
		{Key: store.FieldProject, Value: project},
	}
	opts := options.Find().SetSort(bson.D{{Key: store.FieldTimestamp, Value: 1}}).SetBatchSize(10_000)
	return rd.find(ctx, filter, opts, fn)
}

// latestRootTick returns the latest tick that has a document of the root of its tree
// version: for each version from the latest, the latest root document of the ticks it is
// effective for.
func (rd *reader) latestRootTick(ctx context.Context, project string) (time.Time, bool, error) {
	vs, err := rd.trees.Versions(ctx, project)
	if err != nil {
		return time.Time{}, false, err
	}
	slices.SortFunc(vs, func(a, b treedb.Version) int {
		if c := a.EffectiveFrom.Compare(b.EffectiveFrom); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	end := maxReadTime
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if !v.EffectiveFrom.Before(end) {
			continue // replaced by a later version effective from the same tick
		}
		t, err := rd.trees.Load(ctx, project, v.Version)
		if err != nil {
			return time.Time{}, false, err
		}
		root := t.Root()
		var found store.Node
		ok := false
		err = rd.find(ctx, bson.D{
			{Key: store.FieldID, Value: root.ID},
			{Key: store.FieldType, Value: root.Type},
			{Key: store.FieldTimestamp, Value: bson.D{
				{Key: "$gte", Value: bson.NewDateTimeFromTime(v.EffectiveFrom)},
				{Key: "$lt", Value: bson.NewDateTimeFromTime(end)},
			}},
			{Key: store.FieldProject, Value: project},
		}, options.Find().SetSort(bson.D{{Key: store.FieldTimestamp, Value: -1}}).SetLimit(1),
			func(d store.Node) { found, ok = d, true })
		if err != nil || ok {
			return found.Tick, ok, err
		}
		end = v.EffectiveFrom
	}
	return time.Time{}, false, nil
}

// tickDocs calls fn with every document of project at tick t (leaves and parents), through
// the {project, timestamp} index.
func (rd *reader) tickDocs(ctx context.Context, project string, t time.Time, fn func(store.Node)) error {
	filter := bson.D{
		{Key: store.FieldProject, Value: project},
		{Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(t)},
	}
	return rd.find(ctx, filter, options.Find().SetBatchSize(10_000), fn)
}

// parentDoc returns project's parent document of node (id, typ) at t; ok is false when there
// is none.
func (rd *reader) parentDoc(ctx context.Context, project, id, typ string, t time.Time) (p rollup.Parent, ok bool, err error) {
	raw, err := rd.counts().FindOne(ctx, bson.D{
		{Key: store.FieldID, Value: id},
		{Key: store.FieldType, Value: typ},
		{Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(t)},
		{Key: store.FieldProject, Value: project},
	}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("find parent document: %w", err)
	}
	p, err = store.DecodeParent(raw)
	if err != nil {
		return p, false, fmt.Errorf("%w: %w", errBadDoc, err)
	}
	return p, true, nil
}
