package bulk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/internal/testctx"
)

// TestConcurrentAgents: many agents submit overlapping keys with random versions at once,
// through two writers (two rollup instances) with small batches and several workers, so
// batches for the same keys race on the unique index. No key may get two documents, every
// key must hold its highest submitted version, and that item must report applied.
func TestConcurrentAgents(t *testing.T) {
	e := newEnv(t)
	opts := Options{MaxBatch: 16, MaxDelay: time.Millisecond, Workers: 4}
	writers := []*Writer{startWriter(t, e.coll, opts), startWriter(t, e.coll, opts)}

	const agents, submits, perSubmit = 16, 15, 8
	var keys []Key
	for i := range 24 {
		for j := range 2 {
			keys = append(keys, Key{ID: fmt.Sprintf("n%02d", i), Type: "server", Timestamp: tick0.Add(time.Duration(j) * 5 * time.Minute)})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	versions := rng.Perm(agents * submits * perSubmit) // distinct versions
	online := func(v int64) int64 { return v*7919%10_000 + 1 }
	plan := make([][][]Item, agents)
	next := 0
	for a := range agents {
		for range submits {
			var batch []Item
			for range perSubmit {
				v := int64(versions[next]) + 1
				next++
				batch = append(batch, Item{Key: keys[rng.IntN(len(keys))], Project: "p", Online: online(v),
					Version: v, SubmissionID: fmt.Sprintf("a%d", a)})
			}
			plan[a] = append(plan[a], batch)
		}
	}

	results := make([][][]Result, agents)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, agents)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for s, batch := range plan[a] {
				res, err := writers[(a+s)%len(writers)].Submit(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				results[a] = append(results[a], res)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}

	best := map[dedupKey]int64{}
	for a := range agents {
		for s, batch := range plan[a] {
			for i, it := range batch {
				k := keyOf(it.Key)
				best[k] = max(best[k], it.Version)
				r := results[a][s][i]
				if r.Outcome != OutcomeApplied && r.Outcome != OutcomeStale {
					t.Fatalf("agent %d submit %d item %d: %v %v", a, s, i, r.Outcome, r.Err)
				}
			}
		}
	}
	for a := range agents {
		for s, batch := range plan[a] {
			for i, it := range batch {
				if it.Version == best[keyOf(it.Key)] && results[a][s][i].Outcome != OutcomeApplied {
					t.Errorf("the newest version %d of %+v reported %v", it.Version, it.Key, results[a][s][i].Outcome)
				}
			}
		}
	}
	docs := byKey(t, e.leaves(t)) // fails on a duplicate key
	if len(docs) != len(best) {
		t.Fatalf("%d documents, want %d", len(docs), len(best))
	}
	for k, v := range best {
		d := docs[k]
		if d.Version != v || d.Online != online(v) {
			t.Errorf("%+v: stored version %d online %d, want version %d online %d", k, d.Version, d.Online, v, online(v))
		}
	}
}

// TestBackpressure: with the store blocked and the pending set full, Submit blocks (until its
// context ends) instead of dropping, and blocked submitters proceed once space frees up.
func TestBackpressure(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{MaxPending: 4, MaxBatch: 2, Workers: 1, MaxDelay: time.Millisecond})
	if _, err := e.coll.CountDocuments(context.Background(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	e.failPoint(t, bson.D{{Key: "times", Value: 1}},
		bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1000}})

	type answer struct {
		res []Result
		err error
	}
	first := make(chan answer, 1)
	go func() {
		r, err := w.Submit(context.Background(), []Item{item("a", 1, 1), item("b", 1, 1), item("c", 1, 1), item("d", 1, 1)})
		first <- answer{r, err}
	}()
	testctx.WaitFor(t, "the first update to reach the store", func() bool { return e.proxy.Stats().Commands["update"] >= 1 }) // first batch is blocked in the store

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.Submit(ctx, []Item{item("e", 1, 1)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("submit into a full pending set: %v, want to block until the deadline", err)
	}
	late := make(chan answer, 1)
	go func() {
		r, err := w.Submit(context.Background(), []Item{item("f", 1, 1)})
		late <- answer{r, err}
	}()
	testctx.WaitFor(t, "a second batch to wait for the semaphore", func() bool { w.sem.mu.Lock(); defer w.sem.mu.Unlock(); return len(w.sem.waiters) == 1 })
	select {
	case a := <-first:
		t.Fatalf("first submit returned while the store was blocked: %v", a)
	default:
	}
	for _, ch := range []chan answer{first, late} {
		a := <-ch
		if a.err != nil {
			t.Fatalf("submit: %v", a.err)
		}
		for _, r := range a.res {
			if r.Outcome != OutcomeApplied {
				t.Fatalf("outcome %v %v", r.Outcome, r.Err)
			}
		}
	}
	docs := e.leaves(t)
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	if fmt.Sprint(ids) != "[a b c d f]" {
		t.Fatalf("stored %v, want [a b c d f] (e was never accepted)", ids)
	}
}

// TestConcurrentProjects: two projects' agents submit the same keys at once with random
// versions, through two writers with small batches, so their upserts race on the unique index.
// Whichever project creates a key's document owns it: every later item of the other project
// is rejected (ErrOtherProject), the document's project never changes, and it holds the
// owner's highest version, whose item reports applied; every owner item is applied or stale.
func TestConcurrentProjects(t *testing.T) {
	e := newEnv(t)
	opts := Options{MaxBatch: 16, MaxDelay: time.Millisecond, Workers: 4}
	writers := []*Writer{startWriter(t, e.coll, opts), startWriter(t, e.coll, opts)}
	const agents, submits, perSubmit = 12, 10, 8
	projects := []string{"pa", "pb"}
	var keys []Key
	for i := range 20 {
		keys = append(keys, Key{ID: fmt.Sprintf("n%02d", i), Type: "server", Timestamp: tick0})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	versions := rng.Perm(agents * submits * perSubmit)
	online := func(v int64) int64 { return v*7919%10_000 + 1 }
	plan := make([][][]Item, agents)
	next := 0
	for a := range agents {
		for range submits {
			var batch []Item
			for range perSubmit {
				v := int64(versions[next]) + 1
				next++
				batch = append(batch, Item{Key: keys[rng.IntN(len(keys))], Project: projects[a%2], Online: online(v),
					Version: v, SubmissionID: fmt.Sprintf("a%d", a)})
			}
			plan[a] = append(plan[a], batch)
		}
	}
	results := make([][][]Result, agents)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, agents)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for s, batch := range plan[a] {
				res, err := writers[(a+s)%len(writers)].Submit(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				results[a] = append(results[a], res)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}

	docs := byKey(t, e.leaves(t)) // fails on a duplicate key
	best := map[dedupKey]int64{}  // the owner's highest version
	for a := range agents {
		for _, batch := range plan[a] {
			for _, it := range batch {
				k := keyOf(it.Key)
				if d, ok := docs[k]; ok && d.Project == it.Project {
					best[k] = max(best[k], it.Version)
				}
			}
		}
	}
	rejected := 0
	for a := range agents {
		for s, batch := range plan[a] {
			for i, it := range batch {
				k, r := keyOf(it.Key), results[a][s][i]
				d, ok := docs[k]
				switch {
				case !ok:
					t.Fatalf("%+v: no document", k)
				case d.Project != it.Project:
					rejected++
					if r.Outcome != OutcomeRejected || !errors.Is(r.Err, ErrOtherProject) {
						t.Errorf("%s's item of %s's key %+v: %v (%v), want rejected", it.Project, d.Project, k, r.Outcome, r.Err)
					}
				case it.Version == best[k] && r.Outcome != OutcomeApplied:
					t.Errorf("the owner's newest version %d of %+v reported %v (%v)", it.Version, k, r.Outcome, r.Err)
				case r.Outcome != OutcomeApplied && r.Outcome != OutcomeStale:
					t.Errorf("owner item %+v version %d: %v (%v)", k, it.Version, r.Outcome, r.Err)
				}
			}
		}
	}
	for k, d := range docs {
		if d.Version != best[k] || d.Online != online(best[k]) {
			t.Errorf("%+v: stored version %d online %d (%s), want the owner's newest %d", k, d.Version, d.Online, d.Project, best[k])
		}
	}
	if rejected == 0 {
		t.Fatal("no item met the other project's document: the test exercised nothing")
	}
	t.Logf("%d items rejected as the other project's", rejected)
}
