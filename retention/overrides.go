package retention

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"

	"github.com/gameops/rollup/store"
)

// Collection holds the stored overrides, one document per scope: {_id: "*" (the deployment
// default) or a project name, leaves, 5m, 1h, 1d: periods as ParsePeriod reads them,
// updated_at}. A tier's field is present only when that scope overrides it.
const Collection = "retention"

// DefaultScope is the _id of the deployment default's document ("*" is no project name).
const DefaultScope = "*"

// fieldUpdatedAt is when an override document was last written.
const fieldUpdatedAt = "updated_at"

// Override is a scope's periods, for the tiers it overrides.
type Override map[store.Tier]Period

// Source says where a tier's effective period comes from.
type Source string

// Sources of an effective period, lowest precedence first.
const (
	SourceBuiltIn Source = "built-in default"
	SourceDefault Source = "deployment default"
	SourceProject Source = "project override"
)

// Effective is a project's policy and where each tier's period comes from.
type Effective struct {
	Policy
	From map[store.Tier]Source
}

// Overrides are every stored override. Precedence, per tier: the project's override, else
// the deployment default, else the built-in Defaults.
type Overrides struct {
	// Default is the deployment default (every project without its own override of a tier).
	Default Override
	// Projects are the projects' own overrides.
	Projects map[string]Override
	// Invalid are the stored documents that could not be read, by scope: retention leaves
	// those projects alone (every project, for the default) until they are fixed.
	Invalid map[string]error
}

// For returns project's effective policy ("" for the deployment default alone).
func (o Overrides) For(project string) Effective {
	e := Effective{Policy: Defaults(), From: map[store.Tier]Source{}}
	for _, t := range store.Tiers() {
		e.From[t] = SourceBuiltIn
		if v, ok := o.Default[t]; ok {
			e.Policy, e.From[t] = e.With(t, v), SourceDefault
		}
		if project == "" {
			continue
		}
		if v, ok := o.Projects[project][t]; ok {
			e.Policy, e.From[t] = e.With(t, v), SourceProject
		}
	}
	return e
}

// Usable returns project's effective policy, or why retention must leave the project
// alone: a stored override that does not read, or an effective policy that Validate refuses.
func (o Overrides) Usable(project string, l Limits) (Policy, error) {
	if err := o.Invalid[DefaultScope]; err != nil {
		return Policy{}, err
	}
	if err := o.Invalid[project]; err != nil {
		return Policy{}, err
	}
	p := o.For(project).Policy
	return p, p.Validate(project, l)
}

// Set returns a copy of o with scope's override of each tier of ov replaced (scope is
// DefaultScope or a project).
func (o Overrides) Set(scope string, ov Override) Overrides {
	out := o.clone()
	cur := maps.Clone(out.scope(scope))
	if cur == nil {
		cur = Override{}
	}
	maps.Copy(cur, ov)
	out.put(scope, cur)
	return out
}

// Clear returns a copy of o without scope's overrides of tiers (all of them when tiers is
// empty).
func (o Overrides) Clear(scope string, tiers []store.Tier) Overrides {
	out := o.clone()
	cur := maps.Clone(out.scope(scope))
	if len(tiers) == 0 {
		cur = nil
	}
	for _, t := range tiers {
		delete(cur, t)
	}
	out.put(scope, cur)
	return out
}

// Check validates the deployment default and every project's effective policy; projects
// are every project with an override plus those named (the projects of the deployment).
func (o Overrides) Check(l Limits, projects ...string) error {
	if err := o.For("").Validate("", l); err != nil {
		return err
	}
	all := slices.Sorted(maps.Keys(o.Projects))
	for _, p := range append(all, projects...) {
		if err := o.For(p).Validate(p, l); err != nil {
			return err
		}
	}
	return nil
}

func (o Overrides) scope(s string) Override {
	if s == DefaultScope {
		return o.Default
	}
	return o.Projects[s]
}

func (o *Overrides) put(s string, ov Override) {
	if len(ov) == 0 {
		ov = nil
	}
	if s == DefaultScope {
		o.Default = ov
		return
	}
	if ov == nil {
		delete(o.Projects, s)
		return
	}
	o.Projects[s] = ov
}

func (o Overrides) clone() Overrides {
	out := Overrides{Default: maps.Clone(o.Default), Projects: make(map[string]Override, len(o.Projects)), Invalid: maps.Clone(o.Invalid)}
	for p, ov := range o.Projects {
		out.Projects[p] = maps.Clone(ov)
	}
	return out
}

// Store is the retention collection.
type Store struct {
	coll *mongo.Collection
}

// NewStore returns the retention collection of db (durable writes, majority reads: every
// instance and command sees an override once it is written).
func NewStore(db *mongo.Database) Store {
	return Store{coll: db.Collection(Collection, store.Durable().SetReadConcern(readconcern.Majority()))}
}

// Load reads every override; a document that does not read is in Overrides.Invalid.
func (s Store) Load(ctx context.Context) (Overrides, error) {
	out := Overrides{Projects: map[string]Override{}, Invalid: map[string]error{}}
	cur, err := s.coll.Find(ctx, bson.D{})
	if err != nil {
		return out, fmt.Errorf("read retention overrides: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		scope, ok := cur.Current.Lookup("_id").StringValueOK()
		if !ok {
			continue // not a scope's document
		}
		ov, err := decodeOverride(cur.Current)
		switch {
		case err != nil:
			out.Invalid[scope] = fmt.Errorf("retention override %q: %w (fix it with 'rollup retention set' or 'clear')", scope, err)
		case scope == DefaultScope:
			out.Default = ov
		default:
			out.Projects[scope] = ov
		}
	}
	if err := cur.Err(); err != nil {
		return out, fmt.Errorf("read retention overrides: %w", err)
	}
	return out, nil
}

// decodeOverride reads the tiers of an override document.
func decodeOverride(raw bson.Raw) (Override, error) {
	ov := Override{}
	for _, t := range store.Tiers() {
		v, err := raw.LookupErr(string(t))
		if err != nil {
			continue
		}
		str, ok := v.StringValueOK()
		if !ok {
			return nil, fmt.Errorf("tier %s is a %s, want a period such as \"14d\"", t, v.Type)
		}
		p, err := ParsePeriod(str)
		if err != nil {
			return nil, fmt.Errorf("tier %s: %w", t, err)
		}
		ov[t] = p
	}
	return ov, nil
}

// Save stores scope's override as ov exactly (its document is removed when ov is empty).
func (s Store) Save(ctx context.Context, scope string, ov Override, now time.Time) error {
	if len(ov) == 0 {
		if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: scope}}); err != nil {
			return fmt.Errorf("clear retention override %q: %w", scope, err)
		}
		return nil
	}
	doc := bson.D{{Key: "_id", Value: scope}}
	for _, t := range store.Tiers() {
		if v, ok := ov[t]; ok {
			doc = append(doc, bson.E{Key: string(t), Value: v.String()})
		}
	}
	doc = append(doc, bson.E{Key: fieldUpdatedAt, Value: now})
	_, err := s.coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: scope}}, doc, options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("save retention override %q: %w", scope, err)
	}
	return nil
}
