package soak

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
)

// checkerFixture is a consistent store (every leaf of both projects reported at every tick,
// parents right) and the ledger that produced it, for mutating one thing at a time.
type checkerFixture struct {
	c    *checker
	docs []storedDoc
}

func newCheckerFixture(t *testing.T) *checkerFixture {
	t.Helper()
	p := newPlan(7)
	base := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ticks := make([]time.Time, numTicks)
	for k := range ticks {
		ticks[k] = base.Add(time.Duration(k) * tree.DefaultTick)
	}
	l := newLedger(len(p.projects))
	c := &checker{plan: p, ticks: ticks, ledger: l, versionAt: func(_ context.Context, project string, at time.Time) (int, error) {
		for _, pp := range p.projects {
			if pp.name == project && pp.v2 != nil && !at.Before(ticks[editTick]) {
				return 2, nil
			}
		}
		return 1, nil
	}}
	var docs []storedDoc
	version := int64(1000)
	for pi, pp := range p.projects {
		for k := range numTicks {
			tr, err := tree.Build(pp.name, pp.treeAt(k))
			if err != nil {
				t.Fatal(err)
			}
			v, _ := c.versionAt(context.Background(), pp.name, ticks[k])
			sums := map[string]*storedDoc{}
			for _, n := range tr.Nodes() {
				if !tr.IsLeaf(n.ID) {
					sums[n.ID] = &storedDoc{ID: n.ID, Type: n.Type, Timestamp: ticks[k], Project: pp.name, Rollup: true,
						Expected: int64(tr.LeafCount(n.ID)), TreeVersion: int64(v)}
				}
			}
			for i, leaf := range tr.Leaves() {
				version++
				online := int64(10*k + i)
				r := l.record(pi, leafKey{leaf.ID, k})
				r.sent[version-1] = online + 1 // an older value, also sent
				r.sent[version] = online
				r.acked, r.value = version, online
				docs = append(docs, storedDoc{ID: leaf.ID, Type: leaf.Type, Timestamp: ticks[k], Project: pp.name, Online: online, Version: version})
				for _, a := range tr.Ancestors(leaf.ID) {
					sums[a.ID].Online += online
					sums[a.ID].Reported++
				}
			}
			for _, d := range sums {
				docs = append(docs, *d)
			}
		}
	}
	return &checkerFixture{c: c, docs: docs}
}

// find returns the index of the first document matching.
func (f *checkerFixture) find(t *testing.T, match func(d storedDoc) bool) int {
	t.Helper()
	for i, d := range f.docs {
		if match(d) {
			return i
		}
	}
	t.Fatal("no such document")
	return -1
}

// TestCheckerFindsViolations: the soak's checks accept a consistent store and flag each kind
// of damage on its own (a check that cannot fail proves nothing).
func TestCheckerFindsViolations(t *testing.T) {
	ctx := context.Background()
	check := func(f *checkerFixture) []string {
		bad, err := f.c.parentMismatches(ctx, f.docs)
		if err != nil {
			t.Fatal(err)
		}
		return append(bad, f.c.leafViolations(f.docs)...)
	}
	if bad := check(newCheckerFixture(t)); len(bad) != 0 {
		t.Fatalf("a consistent store: %v", bad)
	}
	root := func(d storedDoc) bool { return d.Rollup && d.ID == "pa" }
	leafAt := func(project string, k int) func(d storedDoc) bool {
		return func(d storedDoc) bool {
			return !d.Rollup && d.Project == project && strings.HasPrefix(d.ID, project+"-g") && d.Timestamp.Minute()%60 == k*5
		}
	}
	for _, c := range []struct {
		name   string
		mutate func(t *testing.T, f *checkerFixture)
		want   string
	}{
		{"a root off by one", func(t *testing.T, f *checkerFixture) { f.docs[f.find(t, root)].Online++ }, "node pa: stored online"},
		{"a parent missing", func(t *testing.T, f *checkerFixture) {
			i := f.find(t, root)
			f.docs = append(f.docs[:i], f.docs[i+1:]...)
		}, "no parent document"},
		{"a parent of another tree version", func(t *testing.T, f *checkerFixture) { f.docs[f.find(t, root)].TreeVersion = 9 }, "tree 9"},
		{"a key stored twice", func(t *testing.T, f *checkerFixture) { f.docs = append(f.docs, f.docs[f.find(t, leafAt("pa", 1))]) }, "two documents for key"},
		{"a leaf of pa stored as pb's", func(t *testing.T, f *checkerFixture) { f.docs[f.find(t, leafAt("pa", 2))].Project = "pb" }, "is stored as project pb's"},
		{"an acknowledged leaf missing", func(t *testing.T, f *checkerFixture) {
			i := f.find(t, leafAt("pb", 0))
			f.docs = append(f.docs[:i], f.docs[i+1:]...)
		}, "acknowledged (version"},
		{"an older version stored", func(t *testing.T, f *checkerFixture) {
			d := &f.docs[f.find(t, leafAt("pb", 3))]
			d.Version, d.Online = d.Version-1, d.Online+1
		}, "older than the acknowledged"},
		{"a value never sent", func(t *testing.T, f *checkerFixture) { f.docs[f.find(t, leafAt("pa", 4))].Online += 1000 }, "not a value pa sent"},
		{"a leaf nobody sent", func(t *testing.T, f *checkerFixture) {
			d := f.docs[f.find(t, leafAt("pb", 5))]
			d.ID = "pb-orphan-1"
			f.docs = append(f.docs, d)
		}, "which pb never sent"},
		{"a rejected item with no other holder", func(t *testing.T, f *checkerFixture) {
			d := f.docs[f.find(t, leafAt("pa", 0))]
			f.c.ledger.leaves[0][leafKey{d.ID, 0}].rejected = true
		}, "was rejected but no other project holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newCheckerFixture(t)
			c.mutate(t, f)
			bad := check(f)
			found := false
			for _, b := range bad {
				found = found || strings.Contains(b, c.want)
			}
			if !found {
				t.Fatalf("want a violation containing %q, got %q", c.want, bad)
			}
		})
	}
}
