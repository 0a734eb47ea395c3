package bulk

// dedupKey identifies a stored document: the timestamp at BSON DateTime (millisecond)
// precision, so two instants the store cannot tell apart are one key.
type dedupKey struct {
	id, typ string
	ms      int64
}

func keyOf(k Key) dedupKey {
	return dedupKey{id: k.ID, typ: k.Type, ms: k.Timestamp.UnixMilli()}
}

// dedup groups items by key. It returns the indices of the winners (one per key, in order of
// first appearance) and, for every item, the index of its key's winner. The winner is the item
// with the highest Version; among equal highest versions the earliest one wins. An unordered
// bulk does not order its ops, so two ops for one key must never be sent together.
func dedup(items []Item) (winners []int, owner []int) {
	owner = make([]int, len(items))
	seen := make(map[dedupKey]int, len(items)) // key → position in winners
	winners = make([]int, 0, len(items))
	for i, it := range items {
		k := keyOf(it.Key)
		pos, ok := seen[k]
		if !ok {
			seen[k] = len(winners)
			winners = append(winners, i)
			continue
		}
		if it.Version > items[winners[pos]].Version {
			winners[pos] = i
		}
	}
	for _, w := range winners {
		seen[keyOf(items[w].Key)] = w
	}
	for i, it := range items {
		owner[i] = seen[keyOf(it.Key)]
	}
	return winners, owner
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
