package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/rollup"
)

// Counts is the counts collection and the queries rollup runs on it.
type Counts struct {
	coll *mongo.Collection
}

// NewCounts returns the counts collection of db with opts (write and read concerns are the
// caller's choice).
func NewCounts(db *mongo.Database, opts ...options.Lister[options.CollectionOptions]) Counts {
	return Counts{coll: db.Collection(CountsCollection, opts...)}
}

// Collection is the underlying collection (for writes, change streams and tests).
func (c Counts) Collection() *mongo.Collection { return c.coll }

// Ticks returns the distinct ticks of project's documents in [from, to), ascending (the
// {project, timestamp} index).
func (c Counts) Ticks(ctx context.Context, project string, from, to time.Time) ([]time.Time, error) {
	return distinctTicks(ctx, c.coll, project, from, to)
}

// distinctTicks returns the distinct timestamps of project's documents of coll in [from, to),
// ascending.
func distinctTicks(ctx context.Context, coll *mongo.Collection, project string, from, to time.Time) ([]time.Time, error) {
	res := coll.Distinct(ctx, FieldTimestamp, bson.D{
		{Key: FieldProject, Value: project},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
	})
	var raw []bson.DateTime
	if err := DistinctInto(res, &raw); err != nil {
		return nil, fmt.Errorf("list ticks of %s: %w", project, err)
	}
	out := make([]time.Time, len(raw))
	for i, d := range raw {
		out[i] = d.Time().UTC()
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal), nil
}

// HasDocuments reports whether project has any document in the counts collection.
func (c Counts) HasDocuments(ctx context.Context, project string) (bool, error) {
	err := c.coll.FindOne(ctx, bson.D{{Key: FieldProject, Value: project}},
		options.FindOne().SetProjection(bson.D{{Key: fieldMongoID, Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find a document of %s: %w", project, err)
	}
	return true, nil
}

// TickParents returns every parent and root document of project at tick by key, as stored
// (duplicates of a key: the last one read). Decode them with DecodeParent.
func (c Counts) TickParents(ctx context.Context, project string, tick time.Time) (map[Key][]bson.Raw, error) {
	out := map[Key][]bson.Raw{}
	filter := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: tick}, {Key: FieldRollup, Value: true}}
	err := c.each(ctx, filter, func(doc bson.Raw) {
		k, _ := KeyOf(doc)
		out[k] = append(out[k], slices.Clone(doc))
	})
	if err != nil {
		return nil, fmt.Errorf("read parents of %s at %s: %w", project, tick.Format(time.RFC3339), err)
	}
	return out, nil
}

// Invalid is a document that does not decode (see InvalidDocError).
type Invalid struct {
	// ID and Type are the document's, when they are strings ("" otherwise).
	ID, Type string
	// Err says what is wrong.
	Err error
}

// TickLeaves returns every leaf document of project at tick, decoded (DecodeLeaf), and the
// ones that do not decode.
func (c Counts) TickLeaves(ctx context.Context, project string, tick time.Time) ([]Leaf, []Invalid, error) {
	var leaves []Leaf
	var invalid []Invalid
	filter := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: tick}, {Key: FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}}
	err := c.each(ctx, filter, func(doc bson.Raw) {
		l, err := DecodeLeaf(doc)
		if err != nil {
			k, _ := KeyOf(doc)
			invalid = append(invalid, Invalid{ID: k.ID, Type: k.Type, Err: err})
			return
		}
		leaves = append(leaves, l)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read leaves of %s at %s: %w", project, tick.Format(time.RFC3339), err)
	}
	return leaves, invalid, nil
}

// TickDocs reads everything stored for project at tick as rollup.Check needs it, but the tree:
// its parents first (decoded, or invalid), then its leaves.
func (c Counts) TickDocs(ctx context.Context, project string, tick time.Time) (rollup.TickDocs, error) {
	d := rollup.TickDocs{Tick: tick}
	parents, err := c.TickParents(ctx, project, tick)
	if err != nil {
		return d, err
	}
	keys := make([]Key, 0, len(parents))
	for k := range parents {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		for _, raw := range parents[k] {
			p, err := DecodeParent(raw)
			if err != nil {
				d.Invalid = append(d.Invalid, rollup.InvalidDoc{ID: k.ID, Type: k.Type, Reason: err.Error()})
				continue
			}
			d.Parents = append(d.Parents, p)
		}
	}
	leaves, invalid, err := c.TickLeaves(ctx, project, tick)
	if err != nil {
		return d, err
	}
	for _, l := range leaves {
		d.Leaves = append(d.Leaves, rollup.LeafDoc{ID: l.ID, Leaf: rollup.Leaf{Type: l.Type, Online: l.Online, Version: l.Version}})
	}
	for _, inv := range invalid {
		d.Invalid = append(d.Invalid, rollup.InvalidDoc{ID: inv.ID, Type: inv.Type, Reason: inv.Err.Error()})
	}
	return d, nil
}

func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Type, b.Type), a.Tick.Compare(b.Tick))
}

// ByKeys reads the documents stored under keys with one find on the unique index
// ({id: {$in}, type: {$in}, timestamp: {$in}}, a superset, filtered here); keys without a
// document are absent.
func (c Counts) ByKeys(ctx context.Context, keys []Key) (map[Key]bson.Raw, error) {
	return byKeys(ctx, c.coll, keys)
}

// byKeys is ByKeys on any collection keyed by the unique (id, type, timestamp) index.
func byKeys(ctx context.Context, coll *mongo.Collection, keys []Key) (map[Key]bson.Raw, error) {
	want := make(map[Key]bool, len(keys))
	var ids, types, ticks bson.A
	seenID, seenType, seenTick := map[string]bool{}, map[string]bool{}, map[time.Time]bool{}
	for _, k := range keys {
		want[k] = true
		if !seenID[k.ID] {
			seenID[k.ID] = true
			ids = append(ids, k.ID)
		}
		if !seenType[k.Type] {
			seenType[k.Type] = true
			types = append(types, k.Type)
		}
		if !seenTick[k.Tick] {
			seenTick[k.Tick] = true
			ticks = append(ticks, k.Tick)
		}
	}
	out := make(map[Key]bson.Raw, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	err := each(ctx, coll, bson.D{
		{Key: FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: FieldType, Value: bson.D{{Key: "$in", Value: types}}},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$in", Value: ticks}}},
	}, func(doc bson.Raw) {
		if k, ok := KeyOf(doc); ok && want[k] {
			out[k] = slices.Clone(doc)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %s by key: %w", coll.Name(), err)
	}
	return out, nil
}

// ParentsIn calls fn with the parent and root documents of projects in [from, to) whose id is
// one of ids and whose type is one of types (a superset of the caller's keys, through the
// unique index: one query for the buckets of many projects), projected by NodeProjection and
// decoded by DecodeNode; a document that does not decode comes with its error (fn decides). It
// stops at fn's first error and returns it.
func (c Counts) ParentsIn(ctx context.Context, projects, ids, types []string, from, to time.Time, fn func(Node, error) error) error {
	filter := bson.D{
		{Key: FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: FieldType, Value: bson.D{{Key: "$in", Value: types}}},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
		projectsFilter(projects),
		{Key: FieldRollup, Value: true},
	}
	return c.nodesOrInvalid(ctx, filter, fn)
}

// projectsFilter matches the project of a document against projects: an equality for one.
func projectsFilter(projects []string) bson.E {
	if len(projects) == 1 {
		return bson.E{Key: FieldProject, Value: projects[0]}
	}
	return bson.E{Key: FieldProject, Value: bson.D{{Key: "$in", Value: projects}}}
}

// ProjectParents calls fn with every parent and root document of project in [from, to)
// through the {project, timestamp} index, as ParentsIn does.
func (c Counts) ProjectParents(ctx context.Context, project string, from, to time.Time, fn func(Node, error) error) error {
	filter := bson.D{
		{Key: FieldProject, Value: project},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
		{Key: FieldRollup, Value: true},
	}
	return c.nodesOrInvalid(ctx, filter, fn)
}

// nodesOrInvalid runs filter projected by NodeProjection and calls fn with each document,
// decoded or with its decoding error.
func (c Counts) nodesOrInvalid(ctx context.Context, filter bson.D, fn func(Node, error) error) error {
	cur, err := c.coll.Find(ctx, filter, options.Find().SetProjection(NodeProjection).SetBatchSize(10_000))
	if err != nil {
		return fmt.Errorf("find counts: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		n, err := DecodeNode(cur.Current)
		if err != nil {
			n.ID, n.Type = "", ""
			if k, ok := KeyOf(cur.Current); ok {
				n.ID, n.Type, n.Tick = k.ID, k.Type, k.Tick
			}
		}
		if err := fn(n, err); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read counts: %w", err)
	}
	return nil
}

// LeavesWrittenSince calls fn with every leaf document written at or after from (every leaf
// when from is zero) whose project matches projects (nil: any), through the written_at index;
// fn gets the decoded leaf or the error of a document that does not decode. It stops at fn's
// first error and returns it.
func (c Counts) LeavesWrittenSince(ctx context.Context, from time.Time, projects bson.D, fn func(Leaf, error) error) error {
	filter := bson.D{{Key: FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}}
	if !from.IsZero() {
		filter = append(filter, bson.E{Key: FieldWrittenAt, Value: bson.D{{Key: "$gte", Value: from}}})
	}
	if projects != nil {
		filter = append(filter, bson.E{Key: FieldProject, Value: projects})
	}
	cur, err := c.coll.Find(ctx, filter)
	if err != nil {
		return fmt.Errorf("find leaves: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		if err := fn(DecodeLeaf(cur.Current)); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("find leaves: %w", err)
	}
	return nil
}

// NodeRange calls fn with project's documents of node (id, typ) in [from, to), in time order
// (read projected by NodeProjection, through the unique index's range). A document of another
// project under the key (an orphan it wrote before the id joined this tree) is not project's.
// A document that does not decode ends the read with its *InvalidDocError.
func (c Counts) NodeRange(ctx context.Context, project, id, typ string, from, to time.Time, fn func(Node)) error {
	opts := options.Find().SetSort(bson.D{{Key: FieldTimestamp, Value: 1}}).SetBatchSize(10_000)
	return c.nodes(ctx, nodeRangeFilter(project, id, typ, from, to), opts, fn)
}

// LatestNode returns project's latest document of node (id, typ) in [from, to).
func (c Counts) LatestNode(ctx context.Context, project, id, typ string, from, to time.Time) (Node, bool, error) {
	var found Node
	ok := false
	opts := options.Find().SetSort(bson.D{{Key: FieldTimestamp, Value: -1}}).SetLimit(1)
	err := c.nodes(ctx, nodeRangeFilter(project, id, typ, from, to), opts, func(n Node) { found, ok = n, true })
	return found, ok, err
}

func nodeRangeFilter(project, id, typ string, from, to time.Time) bson.D {
	return bson.D{
		{Key: FieldID, Value: id},
		{Key: FieldType, Value: typ},
		{Key: FieldTimestamp, Value: bson.D{
			{Key: "$gte", Value: bson.NewDateTimeFromTime(from)},
			{Key: "$lt", Value: bson.NewDateTimeFromTime(to)},
		}},
		{Key: FieldProject, Value: project},
	}
}

// TickNodes calls fn with every document of project at tick (leaves and parents), through the
// {project, timestamp} index, as NodeRange reads them.
func (c Counts) TickNodes(ctx context.Context, project string, tick time.Time, fn func(Node)) error {
	filter := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(tick)}}
	return c.nodes(ctx, filter, options.Find().SetBatchSize(10_000), fn)
}

// Parent returns project's parent document of node (id, typ) at tick; ok is false when there
// is none. A document that does not decode is an *InvalidDocError.
func (c Counts) Parent(ctx context.Context, project, id, typ string, tick time.Time) (p rollup.Parent, ok bool, err error) {
	raw, err := c.coll.FindOne(ctx, bson.D{
		{Key: FieldID, Value: id},
		{Key: FieldType, Value: typ},
		{Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(tick)},
		{Key: FieldProject, Value: project},
	}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("find parent document: %w", err)
	}
	p, err = DecodeParent(raw)
	if err != nil {
		return p, false, err
	}
	return p, true, nil
}

// nodes runs filter projected by NodeProjection and calls fn with each decoded document.
func (c Counts) nodes(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder, fn func(Node)) error {
	cur, err := c.coll.Find(ctx, filter, opts.SetProjection(NodeProjection))
	if err != nil {
		return fmt.Errorf("find counts: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		n, err := DecodeNode(cur.Current)
		if err != nil {
			return err
		}
		fn(n)
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read counts: %w", err)
	}
	return nil
}

// each calls fn for every document matching filter.
func (c Counts) each(ctx context.Context, filter bson.D, fn func(bson.Raw)) error {
	return each(ctx, c.coll, filter, fn)
}

// each calls fn for every document of coll matching filter.
func each(ctx context.Context, coll *mongo.Collection, filter bson.D, fn func(bson.Raw)) error {
	cur, err := coll.Find(ctx, filter)
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		fn(cur.Current)
	}
	return cur.Err()
}
