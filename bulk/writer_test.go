package bulk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/internal/testctx"
)

func TestWriterVersions(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{})

	steps := []struct {
		name  string
		items []Item
		want  []Outcome
		// stored online per id after the step
		online map[string]int64
	}{
		{
			name:   "new keys are inserted",
			items:  []Item{item("a", 1, 10), item("b", 2, 10), item("c", 3, 10)},
			want:   []Outcome{OutcomeApplied, OutcomeApplied, OutcomeApplied},
			online: map[string]int64{"a": 1, "b": 2, "c": 3},
		},
		{
			name:   "a resend of the same versions is stale and changes nothing",
			items:  []Item{item("a", 1, 10), item("b", 2, 10)},
			want:   []Outcome{OutcomeStale, OutcomeStale},
			online: map[string]int64{"a": 1, "b": 2, "c": 3},
		},
		{
			name:   "older versions never overwrite, newer ones do",
			items:  []Item{item("a", 100, 9), item("b", 200, 11), item("c", 300, 10)},
			want:   []Outcome{OutcomeStale, OutcomeApplied, OutcomeStale},
			online: map[string]int64{"a": 1, "b": 200, "c": 3},
		},
		{
			name:   "duplicates in one submit: the highest version wins, ties share the outcome",
			items:  []Item{item("d", 1, 5), item("d", 2, 7), item("d", 3, 6), item("e", 4, 1), item("e", 4, 1)},
			want:   []Outcome{OutcomeStale, OutcomeApplied, OutcomeStale, OutcomeApplied, OutcomeApplied},
			online: map[string]int64{"a": 1, "b": 200, "c": 3, "d": 2, "e": 4},
		},
		{
			name:   "zero counts are written",
			items:  []Item{item("a", 0, 20)},
			want:   []Outcome{OutcomeApplied},
			online: map[string]int64{"a": 0, "b": 200, "c": 3, "d": 2, "e": 4},
		},
	}
	for _, s := range steps {
		res := submit(t, w, s.items)
		if got := outcomes(res); !slices.Equal(got, s.want) {
			t.Fatalf("%s: outcomes %v, want %v", s.name, got, s.want)
		}
		docs := e.leaves(t)
		got := map[string]int64{}
		for _, d := range docs {
			got[d.ID] = d.Online
		}
		byKey(t, docs)
		for id, want := range s.online {
			if got[id] != want {
				t.Fatalf("%s: stored online[%s] = %d, want %d (all %v)", s.name, id, got[id], want, got)
			}
		}
		if len(got) != len(s.online) {
			t.Fatalf("%s: %d documents, want %d", s.name, len(got), len(s.online))
		}
	}

	docs := e.leaves(t)
	d := docs[0]
	if d.ID != "a" || d.Project != "p" || d.Version != 20 || d.SubmissionID != "s-a-20" || !d.Timestamp.Equal(tick0) {
		t.Fatalf("stored leaf %+v", d)
	}
	var raw bson.M
	if err := e.check.FindOne(context.Background(), bson.D{{Key: "id", Value: "a"}}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["online"].(int64); !ok {
		t.Fatalf("online stored as %T, want int64", raw["online"])
	}
	if _, ok := raw["written_at"].(bson.DateTime); !ok {
		t.Fatalf("written_at stored as %T, want DateTime", raw["written_at"])
	}
}

func TestSubmitEmptyAndClosed(t *testing.T) {
	e := newEnv(t)
	w := New(e.coll, Options{MaxDelay: time.Hour}, nil)
	res, err := w.Submit(context.Background(), nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("empty submit: %v %v", res, err)
	}

	// Items pending when Run's context ends are written before Run returns.
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	type answer struct {
		res []Result
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := w.Submit(context.Background(), []Item{item("a", 1, 1), item("b", 2, 1)})
		got <- answer{r, err}
	}()
	testctx.WaitFor(t, "the condition", func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.pending.len() == 2 })
	cancel()
	a := <-got
	if a.err != nil || !slices.Equal(outcomes(a.res), []Outcome{OutcomeApplied, OutcomeApplied}) {
		t.Fatalf("drained submit: %v %v", a.res, a.err)
	}
	if err := <-runDone; err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := len(e.leaves(t)); n != 2 {
		t.Fatalf("%d leaves after drain, want 2", n)
	}
	if _, err := w.Submit(context.Background(), []Item{item("c", 1, 1)}); !errors.Is(err, ErrClosed) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit after Run: %v, want ErrClosed", err)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("second Run succeeded")
	}
}

// TestLeafNeverOverwritesRollupDocument: a leaf reported under the (id, type) of a parent
// must not replace the watcher's document, whatever its version.
func TestLeafNeverOverwritesRollupDocument(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	parent := bson.D{
		{Key: "id", Value: "g01"}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: tick0},
		{Key: "online", Value: int64(42)}, {Key: "version", Value: int64(3)}, {Key: "rollup", Value: true},
	}
	if _, err := e.check.InsertOne(ctx, parent); err != nil {
		t.Fatal(err)
	}
	res := submit(t, w, []Item{item("g01", 7, 1<<60)})
	if res[0].Outcome != OutcomeRejected || !errors.Is(res[0].Err, ErrParentKey) {
		t.Fatalf("a leaf write over a rollup document reports %v (%v), want rejected with ErrParentKey", res[0].Outcome, res[0].Err)
	}
	var got bson.M
	if err := e.check.FindOne(ctx, bson.D{{Key: "id", Value: "g01"}}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got["online"] != int64(42) || got["rollup"] != true {
		t.Fatalf("rollup document changed to %v", got)
	}
}

// TestForeignDocumentNeverOverwritten: a leaf of project pb is stored; project pa's items for
// that key, whatever their version, are rejected with ErrOtherProject (a message that names
// neither pb nor the stored value), pb's document is untouched, and pa's other items in the
// same batch are applied. A parent's document rejects with ErrParentKey.
func TestForeignDocumentNeverOverwritten(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{})
	victim := item("b01", 17, 500)
	victim.Project = "pb"
	e.seed(t, victim)
	for _, version := range []int64{1, 500, 1 << 60} {
		own, foreign := item("a01", 3, version), item("b01", 999999, version)
		own.Project, foreign.Project = "pa", "pa"
		res := submit(t, w, []Item{own, foreign})
		if res[0].Outcome != OutcomeApplied && res[0].Outcome != OutcomeStale {
			t.Fatalf("version %d: own item %v (%v)", version, res[0].Outcome, res[0].Err)
		}
		if res[1].Outcome != OutcomeRejected || !errors.Is(res[1].Err, ErrOtherProject) {
			t.Fatalf("version %d: foreign item %v (%v), want rejected with ErrOtherProject", version, res[1].Outcome, res[1].Err)
		}
		if msg := res[1].Err.Error(); strings.Contains(msg, "pb") || strings.Contains(msg, "17") {
			t.Fatalf("the rejection leaks the other project's document: %q", msg)
		}
		docs := byKey(t, e.leaves(t))
		if d := docs[keyOf(victim.Key)]; d.Project != "pb" || d.Online != 17 || d.Version != 500 || d.SubmissionID != victim.SubmissionID {
			t.Fatalf("version %d: pb's leaf became %+v", version, d)
		}
	}
}

func TestVerdict(t *testing.T) {
	it := item("x", 1, 100) // project "p"
	tests := []struct {
		name    string
		doc     stored
		found   bool
		want    Result
		reissue bool
	}{
		{"no document (deleted since)", stored{}, false, Result{}, true},
		{"a parent's total", stored{project: "p", version: 1, rollup: true}, true, Result{Outcome: OutcomeRejected, Err: ErrParentKey}, false},
		{"another project's", stored{project: "q", version: 1}, true, Result{Outcome: OutcomeRejected, Err: ErrOtherProject}, false},
		{"no project", stored{version: 1}, true, Result{Outcome: OutcomeRejected, Err: ErrOtherProject}, false},
		{"same version", stored{project: "p", version: 100}, true, Result{Outcome: OutcomeStale}, false},
		{"newer version", stored{project: "p", version: 101}, true, Result{Outcome: OutcomeStale}, false},
		{"older version: an insert race lost", stored{project: "p", version: 99}, true, Result{}, true},
	}
	for _, tc := range tests {
		r, reissue := verdict(it, tc.doc, tc.found)
		if r != tc.want || reissue != tc.reissue {
			t.Errorf("%s: %+v reissue=%v, want %+v %v", tc.name, r, reissue, tc.want, tc.reissue)
		}
	}
}
