package watcher

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/store"
)

// checkpoint is a saved resume token. Everything the stream delivered before the token has its
// rollups durably written.
type checkpoint struct {
	Token bson.Raw `bson:"token"`
	// ClusterTime is the position the token encodes (zero when the token is not decodable).
	ClusterTime bson.Timestamp `bson:"cluster_time"`
	SavedAt     time.Time      `bson:"saved_at"`
}

// since returns the wall-clock time from which leaves written after the checkpoint may be
// missing: the token's cluster time (seconds) when known, else the save time.
func (c checkpoint) since() time.Time {
	if c.ClusterTime.T != 0 {
		return time.Unix(int64(c.ClusterTime.T), 0).UTC()
	}
	return c.SavedAt
}

// checkpoints loads and stores the resume token of one watcher.
type checkpoints struct {
	coll *mongo.Collection
	id   string
	// term, when > 0, is the saver's lease term: a save is refused (lease.ErrFenced) when the
	// stored checkpoint has a newer one.
	term int64
}

func newCheckpoints(db *mongo.Database, id string) checkpoints {
	return checkpoints{coll: db.Collection(store.CheckpointsCollection, store.Durable()), id: id}
}

// load returns the saved checkpoint; ok is false when there is none.
func (c checkpoints) load(ctx context.Context) (checkpoint, bool, error) {
	var cp checkpoint
	err := c.coll.FindOne(ctx, bson.D{{Key: "_id", Value: c.id}}).Decode(&cp)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("load checkpoint: %w", err)
	}
	if len(cp.Token) == 0 {
		return checkpoint{}, false, nil
	}
	return cp, true, nil
}

// save stores token durably (majority, journaled).
func (c checkpoints) save(ctx context.Context, token bson.Raw, now time.Time) (checkpoint, error) {
	cp := checkpoint{Token: token, ClusterTime: tokenTime(token), SavedAt: now.UTC().Truncate(time.Millisecond)}
	filter := bson.D{{Key: "_id", Value: c.id}}
	doc := bson.D{
		{Key: store.FieldToken, Value: cp.Token},
		{Key: store.FieldClusterTime, Value: cp.ClusterTime},
		{Key: store.FieldSavedAt, Value: cp.SavedAt},
	}
	if c.term > 0 {
		// A newer term's checkpoint makes the filter miss, and the upsert then fails on _id.
		filter = append(filter, lease.TermGuard(c.term))
		doc = append(doc, bson.E{Key: store.FieldTerm, Value: c.term})
	}
	_, err := c.coll.ReplaceOne(ctx, filter, doc, options.Replace().SetUpsert(true))
	if c.term > 0 && mongo.IsDuplicateKeyError(err) {
		return checkpoint{}, fmt.Errorf("save checkpoint %s term %d: %w", c.id, c.term, lease.ErrFenced)
	}
	if err != nil {
		return checkpoint{}, fmt.Errorf("save checkpoint: %w", err)
	}
	return cp, nil
}

// tokenTime decodes the cluster time at the start of a resume token's _data: the key-string
// encoding of a Timestamp (type byte 0x82, then 8 bytes big endian), the format of MongoDB 4.2+
// and of the embedded server. It returns the zero Timestamp for any other token.
func tokenTime(token bson.Raw) bson.Timestamp {
	v, err := token.LookupErr("_data")
	if err != nil {
		return bson.Timestamp{}
	}
	s, ok := v.StringValueOK()
	if !ok || len(s) < 18 {
		return bson.Timestamp{}
	}
	b, err := hex.DecodeString(s[:18])
	if err != nil || b[0] != 0x82 {
		return bson.Timestamp{}
	}
	return bson.Timestamp{
		T: uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4]),
		I: uint32(b[5])<<24 | uint32(b[6])<<16 | uint32(b[7])<<8 | uint32(b[8]),
	}
}
