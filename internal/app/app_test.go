package app

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/metrics/totals"
)

// countingSink records the items it receives and applies them.
type countingSink struct{ items int }

func (s *countingSink) Submit(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
	s.items += len(items)
	return make([]bulk.Result, len(items)), nil
}

// TestGatedSink: before the schema is in place no item reaches the writer and the answer is
// ErrUnavailable (503, resend later); once the gate opens every item passes.
func TestGatedSink(t *testing.T) {
	open := make(chan struct{})
	next := &countingSink{}
	g := &gatedSink{open: open, next: next}
	items := []bulk.Item{{Project: "p", Online: 1}, {Project: "p", Online: 2}}
	if _, err := g.Submit(t.Context(), items); !errors.Is(err, bulk.ErrUnavailable) || next.items != 0 {
		t.Fatalf("closed gate: err %v, %d items passed", err, next.items)
	}
	close(open)
	if res, err := g.Submit(t.Context(), items); err != nil || len(res) != 2 || next.items != 2 {
		t.Fatalf("open gate: %v, %d results, %d items passed", err, len(res), next.items)
	}
}

// TestTotalsOptions: the settings become the reader's options; a zero grace is "none".
func TestTotalsOptions(t *testing.T) {
	c := Totals{Grace: 0, Refresh: time.Minute, MaxProjects: 5, Groups: " a, ,b ", MaxGroups: 3}
	o := c.Options()
	if o.Grace >= 0 || o.Interval != time.Minute || o.MaxProjects != 5 || !slices.Equal(o.GroupProjects, []string{"a", "b"}) || o.MaxGroups != 3 {
		t.Fatalf("options %+v", o)
	}
	if (Totals{Grace: totals.DefaultGrace}).Options().Grace != totals.DefaultGrace || (Totals{}).Enabled() {
		t.Fatal("grace or enabled")
	}
}

// TestDefaultInstanceID: the embedded store keeps its id in the data directory (the same after
// a restart); an external store's default is host@listen.
func TestDefaultInstanceID(t *testing.T) {
	dir := t.TempDir()
	first, err := DefaultInstanceID(dir, "127.0.0.1:8080")
	if err != nil || first == "" || CheckInstanceID(first) != nil {
		t.Fatalf("first = %q, %v", first, err)
	}
	again, err := DefaultInstanceID(dir, ":9999")
	if err != nil || again != first {
		t.Fatalf("after a restart: %q, %v; want %q", again, err, first)
	}
	if other, _ := DefaultInstanceID(t.TempDir(), "127.0.0.1:8080"); other == first {
		t.Fatalf("two data directories share the id %q", first)
	}
	host, _ := os.Hostname()
	if id, err := DefaultInstanceID("", ":8080"); err != nil || id != host+"@:8080" {
		t.Fatalf("external store: %q, %v; want %q", id, err, host+"@:8080")
	}
}

func TestLogFields(t *testing.T) {
	c := Config{MongoURI: "mongodb://admin:hunter2@db1,db2/?replicaSet=rs0"}
	for _, f := range c.LogFields() {
		if strings.Contains(f.String, "hunter2") || strings.Contains(f.String, "admin") {
			t.Errorf("log field %s = %q shows a secret", f.Key, f.String)
		}
		if f.Key == "mongodb_uri" && f.String != "mongodb://db1,db2" {
			t.Errorf("mongodb_uri = %q", f.String)
		}
	}
}

// TestLogFieldsApply: the start-up line names only the settings that apply to the store in
// use: no data directory under --demo or with an external store, no demo settings without
// --demo.
func TestLogFieldsApply(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         Config
		want, not []string
	}{
		{"demo", Config{Demo: true, DataDir: "/var/lib/rollup", DemoAgents: 20}, []string{"demo", "demo_agents", "demo_backfill", "embedded_listen"}, []string{"data"}},
		{"embedded", Config{DataDir: "/var/lib/rollup"}, []string{"data", "embedded_listen"}, []string{"demo", "demo_agents", "demo_backfill"}},
		{"external", Config{MongoURI: "mongodb://db1/", DataDir: "/x"}, []string{"mongodb_uri", "instance_id"}, []string{"data", "demo", "embedded_listen"}},
	} {
		keys := map[string]bool{}
		for _, f := range tc.c.LogFields() {
			keys[f.Key] = true
		}
		for _, k := range tc.want {
			if !keys[k] {
				t.Errorf("%s: no %s field (%v)", tc.name, k, keys)
			}
		}
		for _, k := range tc.not {
			if keys[k] {
				t.Errorf("%s: field %s does not apply (%v)", tc.name, k, keys)
			}
		}
	}
}
