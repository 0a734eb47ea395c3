package treedb

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
)

// prefixed is a small tree of project whose node ids start with prefix.
func prefixed(project, prefix string, leaves ...string) []tree.Node {
	nodes := []tree.Node{{ID: prefix + "root", Type: "project"}, {ID: prefix + "g", Type: "group", Parent: prefix + "root"}}
	for _, l := range leaves {
		nodes = append(nodes, tree.Node{ID: l, Type: "process", Parent: prefix + "g"})
	}
	return nodes
}

// TestDirectory: versions of two projects, one replaced from the same tick; the directory
// answers TreeAt exactly as the store's VersionAt for random ticks of its window, and
// OtherOwner names the project whose tree holds an id at that tick.
func TestDirectory(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	now := t0.Add(30 * time.Hour)
	e := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	imports := []struct {
		project string
		nodes   []tree.Node
		at      time.Time
	}{
		{"pa", prefixed("pa", "a-", "a1", "x"), e(0)}, // before the window: in effect at its start
		{"pb", prefixed("pb", "b-", "b1"), e(1)},
		{"pa", prefixed("pa", "a-", "a1", "a2"), e(10)}, // x leaves pa...
		{"pb", prefixed("pb", "b-", "b1", "x"), e(12)},  // ...and joins pb
		{"pb", prefixed("pb", "b-", "b1", "x2"), e(20)}, // replaced from the same tick:
		{"pb", prefixed("pb", "b-", "b1", "x3"), e(20)}, // this one applies
		{"pa", prefixed("pa", "a-", "a1", "a9"), e(40)}, // ahead of now
	}
	for _, im := range imports {
		if _, err := s.Import(ctx, im.project, im.nodes, im.at); err != nil {
			t.Fatalf("import %s at %s: %v", im.project, im.at, err)
		}
	}
	d := NewDirectory(s, DirectoryOptions{Window: 25 * time.Hour})
	d.now = func() time.Time { return now }
	snap, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if from := now.Add(-25 * time.Hour); !snap.Covers(from) || snap.Covers(from.Add(-5*time.Minute)) {
		t.Fatalf("covers from %v", snap.from)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		tick := tree.AlignTick(now.Add(-25*time.Hour).Add(time.Duration(rng.Int64N(int64(40*time.Hour)))), tree.DefaultTick)
		for _, p := range []string{"pa", "pb", "pc"} {
			want, _, ok, err := s.VersionAt(ctx, p, tick)
			if err != nil {
				t.Fatal(err)
			}
			tr, got := snap.TreeAt(p, tick)
			if !ok {
				want = 0
			}
			if got != want || (got == 0) != (tr == nil) {
				t.Fatalf("TreeAt(%s, %s) = version %d, the store says %d", p, tick, got, want)
			}
		}
	}
	owner := []struct {
		project, id string
		at          time.Time
		want        string
	}{
		{"pb", "x", e(6), "pa"},   // pa's x before it moved
		{"pa", "x", e(6), ""},     // its own
		{"pa", "x", e(12), "pb"},  // after the move
		{"pa", "x", e(11.9), ""},  // in between: nobody's
		{"pa", "x2", e(21), ""},   // a replaced version never applies
		{"pa", "x3", e(21), "pb"}, //
		{"pb", "a9", e(41), "pa"}, // a version ahead of now is known
		{"pb", "a9", e(30), ""},   //
		{"pa", "b-root", e(5), "pb"},
		{"pa", "zz", e(5), ""},
	}
	for _, o := range owner {
		if got := snap.OtherOwner(o.project, o.id, o.at); got != o.want {
			t.Errorf("OtherOwner(%s, %s, %s) = %q, want %q", o.project, o.id, o.at, got, o.want)
		}
	}
}

// TestDirectoryRefresh: a snapshot serves for MaxAge without a store query; after it, the next
// call sees a new import; a failed refresh keeps the previous snapshot, and a cold directory
// reports the failure.
func TestDirectoryRefresh(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	now := t0
	d := NewDirectory(s, DirectoryOptions{MaxAge: time.Minute})
	d.now = func() time.Time { return now }
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Snapshot(canceled); err == nil {
		t.Fatal("a cold directory with a failing store returned a snapshot")
	}
	if _, err := s.Import(ctx, "pa", prefixed("pa", "a-", "a1"), t0); err != nil {
		t.Fatal(err)
	}
	first, err := d.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr, v := first.TreeAt("pa", t0); tr == nil || v != 1 {
		t.Fatalf("pa at t0: %v %d", tr, v)
	}
	if _, err := s.Import(ctx, "pb", prefixed("pb", "b-", "b1"), t0); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(59 * time.Second)
	if snap, err := d.Snapshot(canceled); err != nil || snap != first {
		t.Fatalf("within MaxAge: %p %v, want the first snapshot without a query", snap, err)
	}
	now = t0.Add(61 * time.Second)
	if snap, err := d.Snapshot(canceled); err != nil || snap != first {
		t.Fatalf("a failed refresh: %p %v, want the previous snapshot", snap, err)
	}
	now = t0.Add(122 * time.Second)
	snap, err := d.Snapshot(ctx)
	if err != nil || snap == first {
		t.Fatalf("after MaxAge: %p %v, want a new snapshot", snap, err)
	}
	if got := snap.OtherOwner("pa", "b1", t0); got != "pb" {
		t.Fatalf("the new import is not seen: OtherOwner = %q", got)
	}
	if snap.trees[cacheKey{"pa", 1}] != first.trees[cacheKey{"pa", 1}] {
		t.Fatal("an unchanged version was loaded again")
	}
}

func TestSnapshotOf(t *testing.T) {
	a, err := tree.Build("pa", prefixed("pa", "a-", "a1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tree.Build("pb", prefixed("pb", "b-", "b1"))
	if err != nil {
		t.Fatal(err)
	}
	s := SnapshotOf(t0, a, b)
	if tr, v := s.TreeAt("pa", t0); tr != a || v != 1 {
		t.Fatalf("TreeAt(pa) = %v %d", tr, v)
	}
	if tr, _ := s.TreeAt("pa", t0.Add(-time.Second)); tr != nil {
		t.Fatal("a tree before its effective time")
	}
	if got := s.OtherOwner("pa", "b1", t0); got != "pb" || s.OtherOwner("pb", "b1", t0) != "" || !s.Covers(time.Time{}) {
		t.Fatalf("OtherOwner = %q", got)
	}
}
