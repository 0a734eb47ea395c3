package retention_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
)

func period(s string) retention.Period {
	p, err := retention.ParsePeriod(s)
	if err != nil {
		panic(err)
	}
	return p
}

// TestPrecedence: per tier, the project's override, else the deployment default, else the
// built-in default.
func TestPrecedence(t *testing.T) {
	o := retention.Overrides{
		Default:  retention.Override{store.Tier5m: period("60d"), store.Tier1h: period("500d")},
		Projects: map[string]retention.Override{"p": {store.Tier1h: period("700d"), store.TierLeaves: period("7d")}},
	}
	tests := []struct {
		project string
		want    string
		from    []retention.Source
	}{
		{"", "leaves=14d 5m=60d 1h=500d 1d=forever",
			[]retention.Source{retention.SourceBuiltIn, retention.SourceDefault, retention.SourceDefault, retention.SourceBuiltIn}},
		{"q", "leaves=14d 5m=60d 1h=500d 1d=forever",
			[]retention.Source{retention.SourceBuiltIn, retention.SourceDefault, retention.SourceDefault, retention.SourceBuiltIn}},
		{"p", "leaves=7d 5m=60d 1h=700d 1d=forever",
			[]retention.Source{retention.SourceProject, retention.SourceDefault, retention.SourceProject, retention.SourceBuiltIn}},
	}
	for _, tt := range tests {
		e := o.For(tt.project)
		if e.String() != tt.want {
			t.Errorf("%q: %s, want %s", tt.project, e, tt.want)
		}
		for i, tier := range store.Tiers() {
			if e.From[tier] != tt.from[i] {
				t.Errorf("%q %s: from %s, want %s", tt.project, tier, e.From[tier], tt.from[i])
			}
		}
	}
	if got := (retention.Overrides{}).For("x").Policy; got != retention.Defaults() {
		t.Errorf("no overrides: %s", got)
	}
}

// TestSetClearCheck: Set and Clear return changed copies; Check refuses a deployment default
// that makes a project's policy unsafe, naming the project.
func TestSetClearCheck(t *testing.T) {
	l := retention.DefaultLimits()
	o := retention.Overrides{Projects: map[string]retention.Override{}}
	o2 := o.Set("p", retention.Override{store.TierLeaves: period("40d"), store.Tier5m: period("60d")})
	if len(o.Projects) != 0 || o2.For("p").Leaves != period("40d") {
		t.Fatalf("Set changed the original or did not set: %+v %+v", o, o2)
	}
	if err := o2.Check(l); err != nil {
		t.Fatal(err)
	}
	// A deployment default of 5m 40d would leave p's 5m at 60d (its own) — fine; a default
	// 1h of 45d is shorter than p's 60d of 5m.
	o3 := o2.Set(retention.DefaultScope, retention.Override{store.Tier1h: period("45d")})
	var pe *retention.PolicyError
	if err := o3.Check(l); !errors.As(err, &pe) || pe.Project != "p" || pe.Tier != store.Tier1h {
		t.Fatalf("Check = %v, want project p's 1h refused", err)
	}
	// Clearing p's 5m override falls back to the built-in 35d, and its leaves (40d) are now
	// longer than its 5m: refused.
	if err := o2.Clear("p", []store.Tier{store.Tier5m}).Check(l); !errors.As(err, &pe) || pe.Tier != store.Tier5m {
		t.Fatalf("Check after clear = %v", err)
	}
	// Clearing everything of p removes it.
	if o4 := o2.Clear("p", nil); len(o4.Projects) != 0 || o4.Check(l) != nil {
		t.Fatalf("clear all: %+v", o4)
	}
	// Check also covers the named projects without overrides (the deployment's).
	bad := retention.Overrides{Default: retention.Override{store.TierLeaves: period("40d")}}
	if err := bad.Check(l, "q"); !errors.As(err, &pe) || pe.Project != "" {
		t.Fatalf("bad default: %v", err)
	}
}

// TestStore: overrides are saved and loaded exactly; a document that does not read is
// reported by scope, and Usable refuses its project (every project, for the default).
func TestStore(t *testing.T) {
	e := newEnv(t)
	s := retention.NewStore(e.db)
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Save(e.ctx, retention.DefaultScope, retention.Override{store.Tier5m: period("40d")}, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(e.ctx, "p", retention.Override{store.Tier1d: retention.Forever, store.TierLeaves: period("36h")}, at); err != nil {
		t.Fatal(err)
	}
	o, err := s.Load(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.For("p").String() != "leaves=36h0m0s 5m=40d 1h=400d 1d=forever" || len(o.Invalid) != 0 {
		t.Fatalf("loaded %+v: %s", o, o.For("p"))
	}
	var doc bson.M
	if err := e.db.Collection(retention.Collection).FindOne(e.ctx, bson.D{{Key: "_id", Value: "p"}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["leaves"] != "36h0m0s" || doc["1d"] != "forever" || doc["5m"] != nil {
		t.Errorf("stored %v", doc)
	}
	// An empty override removes the document.
	if err := s.Save(e.ctx, "p", nil, at); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.db.Collection(retention.Collection).CountDocuments(e.ctx, bson.D{{Key: "_id", Value: "p"}}); n != 0 {
		t.Errorf("%d documents of p after clearing", n)
	}
	// Hand-edited documents that do not read.
	for id, val := range map[string]any{"q": "two weeks", "r": int64(14), retention.DefaultScope: "0d"} {
		if _, err := e.db.Collection(retention.Collection).UpdateOne(e.ctx, bson.D{{Key: "_id", Value: id}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "leaves", Value: val}}}}, optionsUpsert()); err != nil {
			t.Fatal(err)
		}
	}
	o, err = s.Load(e.ctx)
	if err != nil || len(o.Invalid) != 3 {
		t.Fatalf("load: %+v, %v", o.Invalid, err)
	}
	if !strings.Contains(o.Invalid["r"].Error(), "tier leaves is a 64-bit integer") {
		t.Errorf("r: %v", o.Invalid["r"])
	}
	if _, err := o.Usable("z", retention.DefaultLimits()); err == nil || !strings.Contains(err.Error(), `override "*"`) {
		t.Errorf("a broken default must stop every project: %v", err)
	}
}

// TestLateWindowMatchesIngest: the minimum periods assume the ingest API's late-data window.
func TestLateWindowMatchesIngest(t *testing.T) {
	if retention.DefaultLateWindow != api.DefaultLateWindow {
		t.Fatalf("retention assumes a late window of %s, the ingest API has %s", retention.DefaultLateWindow, api.DefaultLateWindow)
	}
}
