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
// once their idle gap has passed (the first was cut before B arrived), alone: not behind A's
// backlog (the 10th and last with one FIFO), nor in a batch of A's (with fair batches alone,
// batch 1 was 900 of A's and B's 100). A sends most of the items: it is the heavy project,
// and its batches are smaller once B sent.
func TestRunawayProjectDoesNotDelayAnother(t *testing.T) {
	w, c, rec := fakeWriter(t, Options{MaxBatch: 1000, MaxDelay: time.Hour, IdleGap: 10 * time.Millisecond, Workers: 1}, true)
	waitA := submitAsync(t, w, projectItems("a", 9900)...)
	testctx.WaitFor(t, "A's first batch sent", func() bool { return len(rec.sent()) == 1 })
	w.waitPending(t, 8900)
	waitB := submitAsync(t, w, projectItems("b", 100)...)
	w.waitPending(t, 9000)
	c.advance(10 * time.Millisecond) // B's idle gap (no timer: the one worker is busy)
	rec.release(0)
	testctx.WaitFor(t, "B's batch sent", func() bool { return len(rec.sent()) == 2 })
	rec.releaseAll()
	waitB()
	w.waitPending(t, 150)
	c.waitArmed(t, 20*time.Millisecond) // A's last, partial batch waits for its idle gap
	c.advance(10 * time.Millisecond)
	waitA()
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
	if !slices.Equal(inBatch["b"], []int{1}) || len(sent[1].ids) != 100 {
		t.Fatalf("B's items went in batches %v of %d (sizes %v), want all in batch 1, alone", inBatch["b"], len(sent), rec.sizes())
	}
	// Once B sent, A's batches hold at most a quarter of MaxBatch (heavyPolicy).
	want := []int{1000, 100}
	for range 8900 / 250 {
		want = append(want, 250)
	}
	want = append(want, 8900%250)
	if got := rec.sizes(); total != 10_000 || !slices.Equal(got, want) {
		t.Fatalf("sent %d items in batches of %v, want 10,000 in %v", total, got, want)
	}
}

// TestHeavyProjectDoesNotHoldBackLight is the runaway benchmark's case (docs/benchmarks.md,
// "A runaway agent against per-token limits"): project A sends most of the items (the heavy
// project) and keeps a batch in flight; project B's items arrive meanwhile, and A's keep
// arriving. B's items go alone once their own idle gap has passed, beside A's
// batch in flight: without the split they waited for A's batch to finish, then for a gap in
// A's arrivals (the idle gap counted from any project's), and then shared a batch with A's.
func TestHeavyProjectDoesNotHoldBackLight(t *testing.T) {
	w, c, rec := fakeWriter(t, Options{MaxBatch: 1000, MaxDelay: 100 * time.Millisecond, IdleGap: 20 * time.Millisecond, Workers: 2}, true)
	var waitA []func() []Result
	waitA = append(waitA, submitAsync(t, w, projectItems("a", 300)...))
	c.waitArmed(t, 20*time.Millisecond)
	c.advance(20 * time.Millisecond) // A's first batch goes, and stays in flight
	testctx.WaitFor(t, "A's first batch sent", func() bool { return len(rec.sent()) == 1 })
	waitB := submitAsync(t, w, projectItems("b", 100)...)
	w.waitPending(t, 100)
	c.waitArmed(t, 40*time.Millisecond) // B's idle gap, from its arrival
	for k := range 2 {                  // A's arrivals at 30 and 35 ms restart no gap of B's
		c.advance(time.Duration(10-5*k) * time.Millisecond)
		items := projectItems("a", 300)
		for i := range items {
			items[i].ID = fmt.Sprintf("a%d-%05d", k, i)
		}
		waitA = append(waitA, submitAsync(t, w, items...))
		w.waitPending(t, 100+300*(k+1))
	}
	c.advance(5 * time.Millisecond)
	testctx.WaitFor(t, "B's batch sent beside A's", func() bool { return len(rec.sent()) == 2 })
	if b := rec.sent()[1]; b.at != 40*time.Millisecond || len(b.ids) != 100 || b.ids[0][:1] != "b" {
		t.Fatalf("batch 1 went at %v with %d items (first %q), want B's 100 alone at 40ms", b.at, len(b.ids), b.ids[0])
	}
	rec.release(1)
	waitB() // answered while A's first batch is still being written
	// B's batch freed a worker, but B sends too: A keeps one batch in flight, not two.
	if w.pendingLen() != 600 || len(rec.sent()) != 2 {
		t.Fatalf("%d pending and %d batches sent after B's, want A's 600 and 2", w.pendingLen(), len(rec.sent()))
	}
	rec.releaseAll()
	c.waitArmed(t, 60*time.Millisecond) // A's idle gap, from its first batch's end
	c.advance(20 * time.Millisecond)
	for _, wait := range waitA {
		wait()
	}
	// A's first batch was cut while A alone sent; then its batches hold at most 250 (and
	// there is one at a time).
	if got := rec.sizes(); !slices.Equal(got, []int{300, 100, 250, 250, 100}) {
		t.Fatalf("batch sizes %v, want [300 100 250 250 100]", got)
	}
}

// TestFairQueueRandom cross-checks fairQueue against per-project FIFOs over random pushes and
// takes (of every project, of every project but one, and of that one alone: the light and
// heavy batches) from a few projects of very different rates: every op is taken once, each project's
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
			// A take of every project's items, or of every project's but a heavy one's
			// (whose split is checked), or of the heavy one's alone.
			heavy := projects[rng.IntN(len(projects))]
			mode := rng.IntN(3)
			if len(naive[heavy]) == 0 || (mode == 1 && len(naive[heavy]) == pending) {
				mode = 0
			}
			var skip *flow
			avail := pending
			if mode > 0 {
				var light pendingSet
				light, skip = q.split(heavy, true)
				checkSplit(t, step, light, skip, naive, heavy)
				avail = pending - len(naive[heavy])
				if mode == 2 {
					avail = len(naive[heavy])
				}
			}
			n := 1 + rng.IntN(min(avail, 2*DefaultMaxBatch))
			var got []op
			if mode == 2 {
				got = q.takeFlow(nil, skip, n)
			} else {
				got = q.take(nil, n, skip)
			}
			if len(got) != n {
				t.Fatalf("step %d: take(%d) gave %d", step, n, len(got))
			}
			taken := map[string]int{}
			for _, o := range got {
				p := o.item.Project
				if (mode == 1 && p == heavy) || (mode == 2 && p != heavy) {
					t.Fatalf("step %d: take of mode %d (heavy %q) gave an op of %q", step, mode, heavy, p)
				}
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
				if mode != 2 && (mode != 1 || p != heavy) && taken[p] < len(ops) && taken[p] < most-1 {
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
			if last := got[len(got)-1].item.Project; mode != 2 && len(naive[last]) > 0 && q.ring[len(q.ring)-1].project != last {
				t.Fatalf("step %d: %q was served last but is not last in the order", step, last)
			}
		}
		checkFairQueue(t, step, &q, naive, pending, last)
	}
}

// checkSplit checks fairQueue.split's light set (every project's pending items but heavy's)
// and heavy's flow against the naive FIFOs.
func checkSplit(t *testing.T, step int, light pendingSet, hf *flow, naive map[string][]op, heavy string) {
	t.Helper()
	var want pendingSet
	for p, ops := range naive {
		if p == heavy {
			continue
		}
		want.n += len(ops)
		if want.oldest.IsZero() || ops[0].at.Before(want.oldest) {
			want.oldest = ops[0].at
		}
		if at := ops[len(ops)-1].at; at.After(want.newest) {
			want.newest = at
		}
	}
	if light != want {
		t.Fatalf("step %d: split(%q) light %+v, want %+v", step, heavy, light, want)
	}
	if hf == nil || hf.project != heavy || hf.q.len() != len(naive[heavy]) {
		t.Fatalf("step %d: split(%q) gave flow %+v, want %d pending", step, heavy, hf, len(naive[heavy]))
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
		for _, o := range q.take(nil, min(4, q.len()), nil) {
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
