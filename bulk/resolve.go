package bulk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// Why resolve rejects an item. The messages say nothing of the stored document (not its
// project, not its value).
var (
	// ErrOtherProject rejects an item whose key holds another project's count: node ids are
	// unique per deployment, and a project writes only its own.
	ErrOtherProject = errors.New("the count stored for this id, type and tick belongs to another project; a token writes only its own project's nodes")
	// ErrParentKey rejects an item whose key holds the watcher's total of a parent node.
	ErrParentKey = errors.New("this id and type hold the total the watcher computes for a parent node; report leaves only")
)

// errContended ends an item whose document vanished between its E11000 and the read, and was
// created again before its re-issue: whose it is now is not known, and a resend finds out.
var errContended = fmt.Errorf("%w: the key was written concurrently; resend", ErrUnavailable)

// docKey is a stored key: the timestamp at BSON DateTime (millisecond) precision.
type docKey struct {
	id, typ string
	ms      int64
}

func keyOfItem(k Key) docKey { return docKey{k.ID, k.Type, k.Timestamp.UnixMilli()} }

// stored is what resolve reads of a document that an upsert met on the unique index.
type stored struct {
	project string
	version int64
	rollup  bool
}

// verdict is the result of an E11000 item given the document stored under its key (found is
// false when the read found none); reissue means the upsert is sent once more instead. The
// guarded upsert hits E11000 when the document is a parent's, another project's, holds a
// same-or-newer version, or when a concurrent upsert of the key won the insert race (the
// winner may hold an older version: then the item still applies).
func verdict(it Item, doc stored, found bool) (r Result, reissue bool) {
	switch {
	case !found:
		return Result{}, true
	case doc.rollup:
		return Result{Outcome: OutcomeRejected, Err: ErrParentKey}, false
	case doc.project != it.Project:
		return Result{Outcome: OutcomeRejected, Err: ErrOtherProject}, false
	case doc.version >= it.Version:
		return Result{Outcome: OutcomeStale}, false
	default:
		return Result{}, true
	}
}

// resolve finishes the items of dups (indices into items, whose upserts failed with E11000):
// it reads their documents in one find and sets each result by verdict; the items to re-issue
// are sent once more in one BulkWrite, where an E11000 now means a same-or-newer version of
// this project was stored meanwhile (stale), since a document's project never changes.
func (w *Writer) resolve(ctx context.Context, b *batch, items []Item, dups []int) {
	w.stats.conflicts.Add(int64(len(dups)))
	docs, err := w.lookup(ctx, items, dups)
	if err != nil {
		class := classify(err)
		if ctx.Err() != nil {
			class = store.ClassContext
		}
		if class == store.ClassUnknownOutcome || class == store.ClassWriteConcern {
			w.health.failed(err)
		}
		w.stats.failures[classIndex(class)].Add(1)
		w.log.Error("reading the documents of duplicate-key ops failed", zap.Int("ops", len(dups)),
			zap.Stringer("class", class), zap.Error(err))
		uerr := fmt.Errorf("%w: %w", ErrUnavailable, err)
		for _, i := range dups {
			b.res[i] = Result{Outcome: OutcomeUnknown, Err: uerr}
		}
		return
	}
	var again []int
	var missing map[int]bool
	for _, i := range dups {
		doc, found := docs[keyOfItem(items[i].Key)]
		r, reissue := verdict(items[i], doc, found)
		if !reissue {
			b.res[i] = r
			continue
		}
		again = append(again, i)
		if !found {
			if missing == nil {
				missing = map[int]bool{}
			}
			missing[i] = true
		}
	}
	if len(again) == 0 {
		return
	}
	w.stats.reissued.Add(int64(len(again)))
	w.log.Debug("re-issuing duplicate-key ops", zap.Int("ops", len(again)), zap.Int("batch", len(items)))
	for _, i := range w.phase(ctx, b, again) {
		if missing[i] {
			b.res[i] = Result{Outcome: OutcomeUnknown, Err: errContended}
		} else {
			b.res[i] = Result{Outcome: OutcomeStale}
		}
	}
}

// lookup reads the documents stored under the keys of items[dups] in one find on the unique
// index ({id: {$in}, type: {$in}, timestamp: {$in}}: a superset, filtered here).
func (w *Writer) lookup(ctx context.Context, items []Item, dups []int) (map[docKey]stored, error) {
	want := make(map[docKey]bool, len(dups))
	var ids, types []string
	var times []int64
	for _, i := range dups {
		k := keyOfItem(items[i].Key)
		want[k] = true
		ids, types, times = append(ids, k.id), append(types, k.typ), append(times, k.ms)
	}
	slices.Sort(ids)
	slices.Sort(types)
	slices.Sort(times)
	ids, types, times = slices.Compact(ids), slices.Compact(types), slices.Compact(times)
	tsv := make(bson.A, len(times))
	for i, ms := range times {
		tsv[i] = bson.DateTime(ms)
	}
	filter := bson.D{
		{Key: store.FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: store.FieldType, Value: bson.D{{Key: "$in", Value: types}}},
		{Key: store.FieldTimestamp, Value: bson.D{{Key: "$in", Value: tsv}}},
	}
	opts := options.Find().SetProjection(bson.D{
		{Key: "_id", Value: 0}, {Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1},
		{Key: store.FieldTimestamp, Value: 1}, {Key: store.FieldProject, Value: 1},
		{Key: store.FieldVersion, Value: 1}, {Key: store.FieldRollup, Value: 1},
	}).SetBatchSize(int32(min(len(dups)+1, 10_000)))
	out := make(map[docKey]stored, len(dups))
	err := w.attempt(ctx, func(ctx context.Context) error {
		cur, err := w.coll.Find(ctx, filter, opts)
		if err != nil {
			return err
		}
		defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
		for cur.Next(ctx) {
			k, doc, err := decodeStored(cur.Current)
			if err != nil {
				return err
			}
			if want[k] {
				out[k] = doc
			}
		}
		return cur.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read %d conflicting documents: %w", len(dups), err)
	}
	return out, nil
}

// decodeStored reads a document projected by lookup. Missing fields are zero: a document
// without a project belongs to no project, so no item's upsert may overwrite it.
func decodeStored(raw bson.Raw) (docKey, stored, error) {
	var k docKey
	var d stored
	var ok bool
	if k.id, ok = raw.Lookup(store.FieldID).StringValueOK(); !ok {
		return k, d, fmt.Errorf("a counts document without a string id: %s", raw)
	}
	if k.typ, ok = raw.Lookup(store.FieldType).StringValueOK(); !ok {
		return k, d, fmt.Errorf("a counts document without a string type: %s", raw)
	}
	if k.ms, ok = raw.Lookup(store.FieldTimestamp).DateTimeOK(); !ok {
		return k, d, fmt.Errorf("a counts document without a date timestamp: %s", raw)
	}
	d.project, _ = raw.Lookup(store.FieldProject).StringValueOK()
	d.version, _ = store.Count(raw.Lookup(store.FieldVersion))
	d.rollup, _ = raw.Lookup(store.FieldRollup).BooleanOK()
	return k, d, nil
}
