package bulk

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// projectItems returns n items of project, with ids unique across projects.
func projectItems(project string, n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{Key: Key{ID: fmt.Sprintf("%s-%05d", project, i), Type: "server", Timestamp: tick0},
			Project: project, Online: 1, Version: 1}
	}
	return out
}

// TestRunawayProjectDoesNotDelayAnother is issue 26's complaint: project A's backlog of
// 9,900 items is pending when project B submits 100. B's items go in the next batch taken
// (the first was cut before B arrived), not behind A's backlog (the 10th and last with one
// FIFO). The sizes make full batches only: a partial one would wait for the fake clock.
func TestRunawayProjectDoesNotDelayAnother(t *testing.T) {
	w, _, rec := fakeWriter(t, Options{MaxBatch: 1000, MaxDelay: time.Hour, Workers: 1}, true)
	waitA := submitAsync(t, w, projectItems("a", 9900)...)
	testctx.WaitFor(t, "A's first batch sent", func() bool { return len(rec.sent()) == 1 })
	w.waitPending(t, 8900)
	waitB := submitAsync(t, w, projectItems("b", 100)...)
	w.waitPending(t, 9000)
	rec.releaseAll()
	waitA()
	waitB()
	sent := rec.sent()
	inBatch := map[string][]int{} // project → the batches that held its items
	total := 0
	for i, b := range sent {
		total += len(b.ids)
		for _, id := range b.ids {
			if p := id[:1]; len(inBatch[p]) == 0 || inBatch[p][len(inBatch[p])-1] != i {
				inBatch[p] = append(inBatch[p], i)
			}
		}
	}
	if !slices.Equal(inBatch["b"], []int{1}) {
		t.Fatalf("B's items went in batches %v of %d, want all in batch 1 (the first cut after they arrived)", inBatch["b"], len(sent))
	}
	if total != 10_000 || len(sent) != 10 {
		t.Fatalf("sent %d items in %d batches (sizes %v), want 10,000 in 10", total, len(sent), rec.sizes())
	}
}

// TestFairQueueRandom cross-checks fairQueue against per-project FIFOs over random pushes and
// takes from a few projects of very different rates: every op is taken once, each project's
// in arrival order; a take gives every project that keeps items pending at least as many as
// any other project got, less one (max-min fair); the project served last goes to the end of
// the order; oldestAt is the oldest pending arrival and newestAt the last arrival; emptied
// projects are forgotten.
func TestFairQueueRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 4))
	projects := []string{"big", "mid", "small", "tiny", ""}
	var q fairQueue
	naive := map[string][]op{}
	pending := 0
	next := 0
	var last time.Time // the last arrival
	req := &request{}
	for step := range 20_000 {
		if rng.IntN(3) > 0 || pending == 0 {
			p := projects[min(rng.IntN(8), len(projects)-1)]
			n := 1 + rng.IntN(map[string]int{"big": 400, "mid": 40, "small": 5}[p]+1)
			for range n {
				o := op{item: Item{Project: p}, idx: next, req: req, at: tick0.Add(time.Duration(next))}
				next++
				q.push(o)
				naive[p] = append(naive[p], o)
				last = o.at
			}
			pending += n
		} else {
			n := 1 + rng.IntN(min(pending, 2*DefaultMaxBatch))
			got := q.take(nil, n)
			if len(got) != n {
				t.Fatalf("step %d: take(%d) gave %d", step, n, len(got))
			}
			taken := map[string]int{}
			for _, o := range got {
				p := o.item.Project
				want := naive[p][taken[p]]
				if o.idx != want.idx {
					t.Fatalf("step %d: %q's op %d taken, want %d (its oldest)", step, p, o.idx, want.idx)
				}
				taken[p]++
			}
			most := 0
			for _, k := range taken {
				most = max(most, k)
			}
			for p, ops := range naive {
				if taken[p] < len(ops) && taken[p] < most-1 {
					t.Fatalf("step %d: take(%d) gave %q %d of its %d pending, another project %d (taken %v)",
						step, n, p, taken[p], len(ops), most, taken)
				}
			}
			for p := range taken {
				naive[p] = naive[p][taken[p]:]
				if len(naive[p]) == 0 {
					delete(naive, p)
				}
			}
			pending -= n
			if last := got[len(got)-1].item.Project; len(naive[last]) > 0 && q.ring[len(q.ring)-1].project != last {
				t.Fatalf("step %d: %q was served last but is not last in the order", step, last)
			}
		}
		checkFairQueue(t, step, &q, naive, pending, last)
	}
}

func checkFairQueue(t *testing.T, step int, q *fairQueue, naive map[string][]op, pending int, last time.Time) {
	t.Helper()
	if q.len() != pending || len(q.flows) != len(naive) || len(q.ring) != len(naive) {
		t.Fatalf("step %d: len %d, %d flows, %d in order; want %d pending in %d projects", step, q.len(), len(q.flows), len(q.ring), pending, len(naive))
	}
	if len(q.free) > keepFlows {
		t.Fatalf("step %d: %d free flows kept", step, len(q.free))
	}
	if pending == 0 {
		return
	}
	var oldest time.Time
	for _, ops := range naive {
		if oldest.IsZero() || ops[0].at.Before(oldest) {
			oldest = ops[0].at
		}
	}
	if !q.oldestAt().Equal(oldest) || !q.newestAt().Equal(last) {
		t.Fatalf("step %d: oldest pending %v, last arrival %v; want %v, %v", step, q.oldestAt(), q.newestAt(), oldest, last)
	}
}

// TestFairQueueRoundRobin: more projects than a take's size are served in turn, so each one
// pending gets an item within a round of takes.
func TestFairQueueRoundRobin(t *testing.T) {
	var q fairQueue
	for i := range 10 {
		for range 3 {
			q.push(op{item: Item{Project: fmt.Sprint(i)}})
		}
	}
	var order []string
	for q.len() > 0 {
		for _, o := range q.take(nil, min(4, q.len())) {
			order = append(order, o.item.Project)
		}
	}
	want := []string{}
	for range 3 {
		for i := range 10 {
			want = append(want, fmt.Sprint(i))
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("served %v, want each project in turn %v", order, want)
	}
}
