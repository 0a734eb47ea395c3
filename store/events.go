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
// project ("" for every project), at, end, title, text, recorded_at}. The read API serves them
// as annotations; they are a log, never read by the rollup itself. The migrations build its
// index EventsProjectAtIndex and its TTL index EventsEndTTLIndex.
const EventsCollection = "events"

// Fields of the events collection that its indexes use.
const (
	FieldEventProject = "project"
	FieldEventAt      = "at"
	FieldEventEnd     = "end"
)

// Index names of the events collection.
const (
	// EventsProjectAtIndex is the index on events {project: 1, at: 1}: the annotations query.
	EventsProjectAtIndex = "project_1_at_1"
	// EventsEndTTLIndex is the TTL index on events.end (EventsTTL).
	EventsEndTTLIndex = "end_ttl"
)

// EventsTTL is how long an event is kept after its end: 400 days, longer than the longest
// range the dashboard shows (1 year); see "Annotations" in docs/dashboard.md.
const EventsTTL = 400 * 24 * time.Hour

// Event kinds.
const (
	// EventReplay is a `rollup replay` of a window (at and end: the window).
	EventReplay = "replay"
	// EventRetention is a retention pass that deleted documents (at: its start, end: its end).
	EventRetention = "retention"
	// EventOutage is a store outage one serve instance saw (at: when its bulk writer began
	// refusing writes, end: when the store took them again), recorded after it ended, for
	// every project (Project ""), one per instance and outage (RecordOnce).
	EventOutage = "outage"
	// EventHistoryLost is a watcher's replay of a window its change stream could no longer
	// deliver (ChangeStreamHistoryLost; at: the window's start, end: when it was replayed).
	EventHistoryLost = "history_lost"
)

// Event is one operational record.
type Event struct {
	// Kind is one of the Event kinds.
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

// RecordOnce writes e under the key id unless an event with that key is stored already (then
// it does nothing): a retried write, or a second recorder of the same thing, stores it once.
func (s Events) RecordOnce(ctx context.Context, id string, e Event) error {
	if e.RecordedAt.IsZero() {
		e.RecordedAt = time.Now().UTC()
	}
	if e.End.IsZero() {
		e.End = e.At
	}
	doc := struct {
		ID    string `bson:"_id"`
		Event `bson:",inline"`
	}{id, e}
	if _, err := s.c.InsertOne(ctx, doc); err != nil && !mongo.IsDuplicateKeyError(err) {
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
