package bulk

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestDedup(t *testing.T) {
	at := func(id string, version int64, ts time.Time) Item {
		return Item{Key: Key{ID: id, Type: "server", Timestamp: ts}, Version: version}
	}
	later := tick0.Add(5 * time.Minute)
	cases := []struct {
		name        string
		items       []Item
		wantWinners []int
		wantOwner   []int
	}{
		{"empty", nil, []int{}, []int{}},
		{"distinct keys", []Item{at("a", 1, tick0), at("b", 1, tick0), at("a", 1, later)}, []int{0, 2, 1}, []int{0, 1, 2}},
		{"highest version wins", []Item{at("a", 1, tick0), at("a", 3, tick0), at("a", 2, tick0)}, []int{1}, []int{1, 1, 1}},
		{"earliest of equal versions wins", []Item{at("a", 2, tick0), at("a", 2, tick0)}, []int{0}, []int{0, 0}},
		{"winners are in key order", []Item{at("b", 1, tick0), at("a", 1, tick0), at("b", 9, tick0)}, []int{1, 2}, []int{2, 1, 2}},
		{"type is part of the key", []Item{at("a", 1, tick0), {Key: Key{ID: "a", Type: "other", Timestamp: tick0}, Version: 5}}, []int{1, 0}, []int{0, 1}},
		{"same instant in another location is the same key", []Item{at("a", 1, tick0), at("a", 2, tick0.In(time.FixedZone("x", 3600)))}, []int{1}, []int{1, 1}},
		{"sub-millisecond differences are the same stored key", []Item{at("a", 5, tick0), at("a", 1, tick0.Add(time.Microsecond))}, []int{0}, []int{0, 0}},
		{"two projects' items for one key are not merged", []Item{at("a", 1, tick0), {Key: Key{ID: "a", Type: "server", Timestamp: tick0}, Project: "q", Version: 5}, at("a", 3, tick0)},
			[]int{2, 1}, []int{2, 1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, winners, owner := dedup(tc.items, nil, nil, nil)
			if !slices.Equal(winners, tc.wantWinners) || !slices.Equal(owner, tc.wantOwner) {
				t.Fatalf("dedup = %v %v, want %v %v", winners, owner, tc.wantWinners, tc.wantOwner)
			}
		})
	}
}

// TestDedupRandom cross-checks dedup against a naive quadratic implementation. The arrays
// of each round are passed to the next, as flush reuses them.
func TestDedupRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var order, winners, owner []int
	for range 500 {
		n := rng.IntN(40)
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{Key: Key{ID: fmt.Sprint(rng.IntN(5)), Type: fmt.Sprint(rng.IntN(2)),
				Timestamp: tick0.Add(time.Duration(rng.IntN(2)) * time.Minute)}, Project: fmt.Sprint(rng.IntN(2)), Version: int64(rng.IntN(4))}
		}
		order, winners, owner = dedup(items, order, winners, owner)
		// Naive: for every item, scan all items with the same key and project for the max
		// version, first on ties.
		var wantWinners []int
		for i, it := range items {
			best := -1
			first := true
			for j, o := range items {
				if keyOf(o.Key) != keyOf(it.Key) || o.Project != it.Project {
					continue
				}
				if j < i {
					first = false
				}
				if best < 0 || o.Version > items[best].Version {
					best = j
				}
			}
			if owner[i] != best {
				t.Fatalf("items %v: owner[%d] = %d, want %d", items, i, owner[i], best)
			}
			if first {
				wantWinners = append(wantWinners, best)
			}
		}
		// Winners are in the unique index's order.
		slices.SortFunc(wantWinners, func(a, b int) int {
			return cmp.Or(cmp.Compare(items[a].ID, items[b].ID), cmp.Compare(items[a].Type, items[b].Type),
				items[a].Timestamp.Compare(items[b].Timestamp), cmp.Compare(items[a].Project, items[b].Project))
		})
		if !slices.Equal(winners, wantWinners) && (len(winners) != 0 || len(wantWinners) != 0) {
			t.Fatalf("items %v: winners %v, want %v", items, winners, wantWinners)
		}
	}
}

func TestLoserResult(t *testing.T) {
	rejected := Result{Outcome: OutcomeRejected, Err: errors.New("bad")}
	unknown := Result{Outcome: OutcomeUnknown, Err: ErrUnavailable}
	winner := Item{Version: 10}
	cases := []struct {
		name  string
		loser int64
		wr    Result
		want  Result
	}{
		{"older, winner applied", 5, Result{Outcome: OutcomeApplied}, Result{Outcome: OutcomeStale}},
		{"older, winner stale", 5, Result{Outcome: OutcomeStale}, Result{Outcome: OutcomeStale}},
		{"older, winner rejected", 5, rejected, rejected},
		{"older, winner unknown", 5, unknown, unknown},
		{"same version, winner applied", 10, Result{Outcome: OutcomeApplied}, Result{Outcome: OutcomeApplied}},
		{"same version, winner stale", 10, Result{Outcome: OutcomeStale}, Result{Outcome: OutcomeStale}},
		{"same version, winner rejected", 10, rejected, rejected},
		{"same version, winner unknown", 10, unknown, unknown},
	}
	for _, tc := range cases {
		if got := loserResult(Item{Version: tc.loser}, winner, tc.wr); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	want := map[Outcome]string{OutcomeUnknown: "unknown", OutcomeApplied: "applied", OutcomeStale: "stale", OutcomeRejected: "rejected", 42: "unknown"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), s)
		}
	}
}

// dedupKey identifies a stored document: the timestamp at BSON DateTime (millisecond)
// precision, so two instants the store cannot tell apart are one key.
type dedupKey struct {
	id, typ string
	ms      int64
}

func keyOf(k Key) dedupKey {
	return dedupKey{id: k.ID, typ: k.Type, ms: k.Timestamp.UnixMilli()}
}
