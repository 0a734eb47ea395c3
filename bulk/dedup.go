package bulk

import (
	"cmp"
	"slices"
	"strings"
)

// dedup groups items by stored key and project. It returns the indices of the winners (one
// per key and project, in key order: the order of the unique index, which is the order write
// sends them in) and, for every item, the index of its group's winner. The winner is the item
// with the highest Version; among equal highest versions the earliest one wins. An unordered
// bulk does not order its ops, so two ops of one project for one key must never be sent
// together. Ops of two projects for one key are: the first to insert owns the key, the other
// is rejected (resolve), whatever the order.
//
// It sorts instead of hashing: the winners come out in the order the batch is sent in, and
// order, winners and owner reuse the arrays passed in (the first is scratch).
func dedup(items []Item, order, winners, owner []int) (_, _, _ []int) {
	order = grow(order, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := compareStoredKeys(items[a].Key, items[b].Key); c != 0 {
			return c
		}
		if c := strings.Compare(items[a].Project, items[b].Project); c != 0 {
			return c
		}
		if c := cmp.Compare(items[b].Version, items[a].Version); c != 0 {
			return c // highest version first
		}
		return cmp.Compare(a, b) // then the earliest
	})
	owner = grow(owner, len(items))
	winners = winners[:0]
	for j, i := range order {
		if prev := items[order[max(j-1, 0)]]; j == 0 || compareStoredKeys(prev.Key, items[i].Key) != 0 || prev.Project != items[i].Project {
			winners = append(winners, i)
		}
		owner[i] = winners[len(winners)-1]
	}
	return order, winners, owner
}

// compareStoredKeys orders keys as the unique (id, type, timestamp) index orders the
// documents they are stored as (timestamps at BSON DateTime precision, milliseconds); 0
// means one document.
func compareStoredKeys(a, b Key) int {
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Type, b.Type); c != 0 {
		return c
	}
	return cmp.Compare(a.Timestamp.UnixMilli(), b.Timestamp.UnixMilli())
}

// loserResult is the result of an item that lost deduplication to winner, whose result is wr.
// An item with the winner's version shares the winner's outcome: the same version is the same
// observation (typically the same submission sent twice), so it was applied exactly when the
// winner was. An item with a lower version is stale once the winner is applied or stale (a
// newer version is stored); if the winner was rejected or its outcome is unknown, the loser
// shares that result, because nothing newer is known to be stored.
func loserResult(loser, winner Item, wr Result) Result {
	if loser.Version < winner.Version && (wr.Outcome == OutcomeApplied || wr.Outcome == OutcomeStale) {
		return Result{Outcome: OutcomeStale}
	}
	return wr
}
