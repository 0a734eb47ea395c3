package rollup

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// randomSeeds returns the seeds to run: ROLLUP_SEED=n runs only n (to reproduce a failure).
func randomSeeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("ROLLUP_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ROLLUP_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

// randomTree returns a tree of 1..maxNodes nodes of uneven depth: every node hangs under a
// random earlier node.
func randomTree(rng *rand.Rand, maxNodes int) []Node {
	types := [...]string{"group", "server", "process"}
	n := 1 + rng.IntN(maxNodes)
	nodes := []Node{{ID: "r", Type: "project"}}
	for i := 1; i < n; i++ {
		parent := nodes[rng.IntN(len(nodes))].ID
		nodes = append(nodes, Node{ID: fmt.Sprintf("n%d", i), Type: types[rng.IntN(len(types))], Parent: parent})
	}
	return nodes
}

// valueOf is the online value a leaf reports at a version: a function of both, so one
// version always carries one value (as the bulk writer's version guard guarantees).
func valueOf(id string, version int64) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", id, version)
	return int64(h.Sum64() % 7) // zero included
}

// randomEvents returns leaf reports for the tree's leaves (some never report), orphans and
// wrong-type reports, several versions each, duplicated and shuffled.
func randomEvents(rng *rand.Rand, tree *testTree) []Contribution {
	var evs []Contribution
	add := func(id, typ string) {
		for range 1 + rng.IntN(4) {
			v := int64(1 + rng.IntN(20))
			c := LeafContribution(id, typ, valueOf(id, v), v)
			for range 1 + rng.IntN(3) {
				evs = append(evs, c)
			}
		}
	}
	for _, n := range tree.nodes {
		if tree.isLeaf(n.ID) && rng.IntN(5) > 0 {
			add(n.ID, n.Type)
		}
		if rng.IntN(10) == 0 {
			add(n.ID, "other") // another document with the same id: never counted
		}
	}
	for i := range rng.IntN(3) {
		add(fmt.Sprintf("orphan%d", i), "process")
	}
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	return evs
}

func (w *world) writeLeaves(evs []Contribution) {
	for _, ev := range evs {
		w.report(ev.Child, ev.ChildType, ev.Online, ev.Version)
	}
	w.pending = nil
}

func splitBatches(rng *rand.Rand, evs []Contribution) [][]Contribution {
	var out [][]Contribution
	for len(evs) > 0 {
		n := 1 + rng.IntN(len(evs))
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(min(len(evs), 8))
		}
		out = append(out, evs[:n])
		evs = evs[n:]
	}
	return out
}

// editTree moves some leaves under other parents and removes others. Unless keepInterior,
// parents left without children become leaves of the tree.
func editTree(rng *rand.Rand, old *testTree, keepInterior bool) []Node {
	var interior []string
	kids := map[string]int{}
	for _, n := range old.nodes {
		if !old.isLeaf(n.ID) {
			interior = append(interior, n.ID)
			kids[n.ID] = len(old.children[n.ID])
		}
	}
	var nodes []Node
	for _, n := range old.nodes {
		if old.isLeaf(n.ID) && n.Parent != "" && (!keepInterior || kids[n.Parent] > 1) {
			switch rng.IntN(10) {
			case 0:
				kids[n.Parent]--
				continue // removed
			case 1, 2:
				kids[n.Parent]--
				n.Parent = interior[rng.IntN(len(interior))]
				kids[n.Parent]++
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// TestRandomLevelByLevel applies random leaf events through the watcher's level-by-level
// algorithm in random batches, with crashes between levels (the batch is then redelivered),
// old batches redelivered late, and sometimes a tree edit followed by a refresh; every parent
// must end equal to FullRecompute of the final leaves, and redelivering everything must write
// nothing.
func TestRandomLevelByLevel(t *testing.T) {
	for _, seed := range randomSeeds(t, 400) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		tree, err := newTestTree(1, randomTree(rng, 40))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		w := newWorld(t)
		w.tree = tree
		evs := randomEvents(rng, tree)
		w.writeLeaves(evs)
		batches := splitBatches(rng, evs)
		edited := false
		for i, b := range batches {
			if !edited && rng.IntN(10) == 0 {
				// The replay of the tick after the edit: Rebuild, or Merge when no interior
				// node becomes a leaf (Merge keeps a stored child that is still a child).
				rebuild := rng.IntN(2) == 0
				nt, err := newTestTree(2, editTree(rng, w.tree, !rebuild))
				if err != nil {
					t.Fatalf("seed %d: edit: %v", seed, err)
				}
				w.tree, edited = nt, true
				if rebuild {
					w.refresh(Rebuild)
				} else {
					w.refresh(Merge)
				}
			}
			for rng.IntN(5) == 0 { // crash after some levels: the batch comes again
				w.deliver(b, 1+rng.IntN(3), false)
			}
			w.deliver(b, 0, false)
			if rng.IntN(4) == 0 { // an old batch, late
				w.deliver(batches[rng.IntN(i+1)], 0, false)
			}
		}
		if bad := w.check(); len(bad) > 0 {
			t.Fatalf("seed %d (ROLLUP_SEED=%d to rerun): %d mismatches, first: %s\n%s", seed, seed, len(bad), bad[0], w.render())
		}
		writes := w.writes
		w.deliver(evs, 0, false)
		if w.writes != writes {
			t.Fatalf("seed %d: redelivering every event wrote %d documents", seed, w.writes-writes)
		}
	}
}

// TestRandomAnyOrder merges messages (a parent and some contributions) in a random order, not
// level by level: contributions of a child may reach its parent before older ones, a parent may
// be merged before its children are, messages are duplicated and merged together. The result
// must still be FullRecompute's.
func TestRandomAnyOrder(t *testing.T) {
	type msg struct {
		to string
		in []Contribution
	}
	for _, seed := range randomSeeds(t, 400) {
		rng := rand.New(rand.NewPCG(seed, 0xa11))
		tree, err := newTestTree(1, randomTree(rng, 40))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		w := newWorld(t)
		w.tree = tree
		evs := randomEvents(rng, tree)
		w.writeLeaves(evs)
		var queue, sent []msg
		for _, ev := range evs {
			n, ok := tree.byID[ev.Child]
			if !ok || n.Parent == "" || !tree.isLeaf(n.ID) {
				// Route some orphans anyway: Merge must drop them.
				n = tree.nodes[rng.IntN(len(tree.nodes))]
				if tree.isLeaf(n.ID) {
					continue
				}
				queue = append(queue, msg{to: n.ID, in: []Contribution{ev}})
				continue
			}
			queue = append(queue, msg{to: n.Parent, in: []Contribution{ev}})
		}
		replays := 0
		for len(queue) > 0 {
			i := rng.IntN(len(queue))
			m := queue[i]
			queue[i] = queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			m.in = slices.Clone(m.in)
			// Merge other messages for the same parent in the same call, sometimes.
			for j := 0; j < len(queue); j++ {
				if queue[j].to == m.to && rng.IntN(2) == 0 {
					m.in = append(m.in, queue[j].in...)
					queue[j] = queue[len(queue)-1]
					queue = queue[:len(queue)-1]
					j--
				}
			}
			sent = append(sent, m)
			p, _ := w.parent(m.to)
			q, changed := Merge(p, m.in, tree.childSet(m.to))
			if changed {
				w.store(q)
			}
			if up := tree.byID[m.to].Parent; up != "" && q.Rev > 0 {
				queue = append(queue, msg{to: up, in: []Contribution{q.Contribution()}})
			}
			if replays < 50 && rng.IntN(10) == 0 { // an old message, again
				replays++
				queue = append(queue, sent[rng.IntN(len(sent))])
			}
		}
		if bad := w.check(); len(bad) > 0 {
			t.Fatalf("seed %d (ROLLUP_SEED=%d to rerun): %d mismatches, first: %s\n%s", seed, seed, len(bad), bad[0], w.render())
		}
	}
}
