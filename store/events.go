package store

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// EventsCollection holds rollup's own operational records, one document per event: {kind,
// project ("" for every project), at, end, title, text}. The read API serves them as
// annotations; they are a log, never read by the rollup itself.
const EventsCollection = "events"

// Event kinds.
const (
	// EventReplay is a `rollup replay` of a window (at and end: the window).
	EventReplay = "replay"
	// EventRetention is a retention pass that deleted documents (at: its start, end: its end).
	EventRetention = "retention"
)

// Event is one operational record.
type Event struct {
	// Kind is EventReplay or EventRetention.
	Kind string `bson:"kind"`
	// Project is the project concerned, "" for all of them.
	Project string `bson:"project"`
	// At and End bound what the event is about (End equals At for an instant).
	At  time.Time `bson:"at"`
	End time.Time `bson:"end"`
	// Title is a one-line summary; Text details it.
	Title string `bson:"title"`
	Text  string `bson:"text"`
	// RecordedAt is when it was written.
	RecordedAt time.Time `bson:"recorded_at"`
}

// Events reads and writes the events collection.
type Events struct{ c *mongo.Collection }

// NewEvents returns the events collection of db.
func NewEvents(db *mongo.Database) Events { return Events{c: db.Collection(EventsCollection)} }

// Record writes e (RecordedAt set to now when zero).
func (s Events) Record(ctx context.Context, e Event) error {
	if e.RecordedAt.IsZero() {
		e.RecordedAt = time.Now().UTC()
	}
	if e.End.IsZero() {
		e.End = e.At
	}
	if _, err := s.c.InsertOne(ctx, e); err != nil {
		return fmt.Errorf("record %s event: %w", e.Kind, err)
	}
	return nil
}

// Range returns the events of project (and those of every project) that overlap [from, to),
// by At; at most limit of them.
func (s Events) Range(ctx context.Context, project string, from, to time.Time, limit int) ([]Event, error) {
	cur, err := s.c.Find(ctx, bson.D{
		{Key: "project", Value: bson.D{{Key: "$in", Value: bson.A{project, ""}}}},
		{Key: "at", Value: bson.D{{Key: "$lt", Value: to}}},
		{Key: "end", Value: bson.D{{Key: "$gte", Value: from}}},
	}, options.Find().SetSort(bson.D{{Key: "at", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	var out []Event
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}
