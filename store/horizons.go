package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// HorizonsCollection holds one document per project, {_id: project, leaves, 5m, 1h, 1d}: for
// each tier the date below which retention may have deleted its documents (absent: nothing
// deleted). Package retention advances them; replay and verify read them.
const HorizonsCollection = "horizons"

// docHorizons names a horizons document in an *InvalidDocError.
const docHorizons = "horizons"

// Tiers lists every tier, finest first.
func Tiers() []Tier { return []Tier{TierLeaves, Tier5m, Tier1h, Tier1d} }

// Valid reports whether t is one of Tiers.
func (t Tier) Valid() bool {
	switch t {
	case TierLeaves, Tier5m, Tier1h, Tier1d:
		return true
	}
	return false
}

// Horizon is one project's horizons: documents of a tier with a timestamp before its date may
// have been deleted by retention. The zero time means nothing of that tier was deleted.
type Horizon struct{ Leaves, FiveMin, Hour, Day time.Time }

// Of returns tier t's horizon (zero for an unknown tier).
func (h Horizon) Of(t Tier) time.Time {
	switch t {
	case TierLeaves:
		return h.Leaves
	case Tier5m:
		return h.FiveMin
	case Tier1h:
		return h.Hour
	case Tier1d:
		return h.Day
	}
	return time.Time{}
}

// set sets tier t's horizon.
func (h *Horizon) set(t Tier, v time.Time) {
	switch t {
	case TierLeaves:
		h.Leaves = v
	case Tier5m:
		h.FiveMin = v
	case Tier1h:
		h.Hour = v
	case Tier1d:
		h.Day = v
	}
}

// Horizons is the horizons collection. Writes are durable (w: majority, j: true) and reads
// read concern majority, so a horizon read after it was advanced is never older than it.
type Horizons struct {
	coll *mongo.Collection
}

// NewHorizons returns the horizons collection of db.
func NewHorizons(db *mongo.Database) Horizons {
	return Horizons{coll: db.Collection(HorizonsCollection, Durable().SetReadConcern(readconcern.Majority()))}
}

// Get returns project's horizons (zero when retention never deleted anything of it).
func (h Horizons) Get(ctx context.Context, project string) (Horizon, error) {
	raw, err := h.coll.FindOne(ctx, bson.D{{Key: fieldMongoID, Value: project}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Horizon{}, nil
	}
	if err != nil {
		return Horizon{}, fmt.Errorf("read horizons of %s: %w", project, err)
	}
	out, err := decodeHorizon(raw)
	if err != nil {
		return Horizon{}, fmt.Errorf("horizons of %s: %w", project, err)
	}
	return out, nil
}

// All returns every project's horizons.
func (h Horizons) All(ctx context.Context) (map[string]Horizon, error) {
	cur, err := h.coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("read horizons: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	out := map[string]Horizon{}
	for cur.Next(ctx) {
		id, ok := cur.Current.Lookup(fieldMongoID).StringValueOK()
		if !ok {
			continue // not a project's document
		}
		hz, err := decodeHorizon(cur.Current)
		if err != nil {
			return nil, fmt.Errorf("horizons of %s: %w", id, err)
		}
		out[id] = hz
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("read horizons: %w", err)
	}
	return out, nil
}

// decodeHorizon reads a horizons document; a tier's field that is not a date makes it
// invalid (an *InvalidDocError).
func decodeHorizon(raw bson.Raw) (Horizon, error) {
	var out Horizon
	for _, t := range Tiers() {
		v, err := raw.LookupErr(string(t))
		if err != nil {
			continue
		}
		d, ok := v.DateTimeOK()
		if !ok {
			return out, typeError(docHorizons, string(t), v, "date")
		}
		out.set(t, time.UnixMilli(d).UTC())
	}
	return out, nil
}

// Advance records durably that documents of tier t of project before `before` may be deleted
// from now on. Horizons only move forward ($max): an earlier date changes nothing. Retention
// calls it BEFORE it deletes, so a reader that finds a horizon at or before a tick after
// reading the tick's documents read them whole.
func (h Horizons) Advance(ctx context.Context, project string, t Tier, before time.Time) error {
	if !t.Valid() {
		return fmt.Errorf("advance horizon of %s: unknown tier %q", project, t)
	}
	if before.IsZero() {
		return nil
	}
	_, err := h.coll.UpdateOne(ctx, bson.D{{Key: fieldMongoID, Value: project}},
		bson.D{{Key: "$max", Value: bson.D{{Key: string(t), Value: bson.NewDateTimeFromTime(before)}}}},
		options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("advance %s horizon of %s to %s: %w", t, project, before.UTC().Format(time.RFC3339), err)
	}
	return nil
}
