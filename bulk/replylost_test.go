package bulk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// TestReplyLost drives the writer into onPrimaryTransactionalWrite: a statement of the bulk
// update is applied and durable, then the connection closes before the reply (or the
// statement fails before commit). The driver's retry carries the same lsid and txnNumber, so
// the server replays the statements its session remembers and runs only the rest; the
// writer's resend, when the retry is lost too, is a new write whose already-applied
// statements meet their own versions and end stale. Either way every item ends applied or
// stale exactly as it would without the fault, the stored leaves equal the batch, and the
// number of update commands is exact.
func TestReplyLost(t *testing.T) {
	// n00-n09 are stored with an older version (applied), n10-n19 with the batch's version
	// (stale), n20-n29 are new (applied by upsert). The writer sends them in key order, so
	// statement i is n<i>.
	var batch, older, same []Item
	want := map[string]Outcome{}
	for i := range 30 {
		id := fmt.Sprintf("n%02d", i)
		batch = append(batch, item(id, int64(1000+i), 100))
		switch {
		case i < 10:
			older = append(older, item(id, 1, 50))
			want[id] = OutcomeApplied
		case i < 20:
			same = append(same, item(id, int64(1000+i), 100))
			want[id] = OutcomeStale
		default:
			want[id] = OutcomeApplied
		}
	}
	cases := []struct {
		name    string
		mode    any
		data    bson.D
		stale   []string // applied by a lost attempt, so stale for the writer's resend
		updates int
		// embeddedOnly: the counts rely on the embedded server stopping the command at the
		// statement whose reply is lost; mongod may run more of the batch before the closed
		// connection interrupts it.
		embeddedOnly bool
	}{
		{
			// The attempt applies statement 0 and loses the reply; the driver's retry replays
			// statement 0 (applied, as it answered the first time) and runs 1-29. The writer
			// reads the 10 E11000 ops' documents (stale): 2 update commands.
			name: "reply lost once: the driver's retry replays what was applied",
			mode: bson.D{{Key: "times", Value: 1}}, updates: 2,
		},
		{
			name: "fail before commit once: the driver's retry applies everything",
			mode: bson.D{{Key: "times", Value: 1}}, data: bson.D{{Key: "failBeforeCommitExceptionCode", Value: 1}}, updates: 2,
		},
		{
			// The retry replays statement 0, applies statement 1 and loses its reply too. The
			// writer resends the batch (a new write): n00 and n01 now meet their own version
			// (E11000, read with the 10 seeded ones: stale).
			name: "reply lost twice: the writer's resend finds its own versions",
			mode: bson.D{{Key: "times", Value: 2}}, stale: []string{"n00", "n01"}, updates: 3, embeddedOnly: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.embeddedOnly {
				e.store.SkipIfReal(t)
			}
			e.seed(t, append(append([]Item(nil), older...), same...)...)
			w := startWriter(t, e.coll, Options{Workers: 1})
			e.txnWriteFailPoint(t, tc.mode, tc.data)
			e.proxy.ResetStats()

			res := submit(t, w, batch)
			wantNow := withOutcome(want, tc.stale, OutcomeStale)
			for i, r := range res {
				if r.Outcome != wantNow[batch[i].ID] {
					t.Errorf("%s: %v (%v), want %v", batch[i].ID, r.Outcome, r.Err, wantNow[batch[i].ID])
				}
			}
			if got, _ := updateCounts(t, e.proxy); got != tc.updates {
				t.Errorf("%d update commands reached the store, want %d", got, tc.updates)
			}
			e.checkStored(t, batch)
		})
	}

	// The fault that lasts: every attempt applies one more statement and loses its reply.
	// The writer fails fast (ErrUnavailable, after the driver's retry and its own resend);
	// once the fault is gone, the agent's resend lands every item applied or stale, nothing
	// counted twice.
	t.Run("reply always lost: unavailable, then the agent's resend is exact", func(t *testing.T) {
		e := newEnv(t)
		e.store.SkipIfReal(t) // as embeddedOnly above
		e.seed(t, append(append([]Item(nil), older...), same...)...)
		// The probe opens a new connection (the lost replies closed the others): on a loaded
		// machine that took over the default second once, and without its probe the writer
		// rightly gives up before the resend this case counts.
		w := startWriter(t, e.coll, Options{Workers: 1, ProbeTimeout: 10 * time.Second})
		e.txnWriteFailPoint(t, "alwaysOn", nil)
		e.proxy.ResetStats()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := w.Submit(ctx, batch)
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("submit = %v, want ErrUnavailable", err)
		}
		for i, r := range res {
			if r.Outcome != OutcomeUnknown {
				t.Fatalf("%s: %v, want unknown", batch[i].ID, r.Outcome)
			}
		}
		// The probe before the resend succeeds: onPrimaryTransactionalWrite fails only
		// retryable statements, and the probe is a multi-document update.
		if got, probes := updateCounts(t, e.proxy); got != 4 || probes == 0 {
			t.Errorf("%d update commands and %d probes, want 4 (attempt, driver retry, resend, driver retry) and a probe", got, probes)
		}
		// Each attempt applied one statement before losing its reply: n00-n03.
		e.txnWriteFailPoint(t, "off", nil)
		res = submit(t, w, batch)
		wantNow := withOutcome(want, []string{"n00", "n01", "n02", "n03"}, OutcomeStale)
		for i, r := range res {
			if r.Outcome != wantNow[batch[i].ID] {
				t.Errorf("resend: %s: %v (%v), want %v", batch[i].ID, r.Outcome, r.Err, wantNow[batch[i].ID])
			}
		}
		e.checkStored(t, batch)
	})
}

// txnWriteFailPoint arms onPrimaryTransactionalWrite (every retryable write statement).
func (e *env) txnWriteFailPoint(t testing.TB, mode any, data bson.D) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: mode}}
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	e.store.FailPoint(t, e.direct, cmd)
}

// checkStored fails unless the stored leaves are exactly batch's values, one per key.
func (e *env) checkStored(t testing.TB, batch []Item) {
	t.Helper()
	docs := byKey(t, e.leaves(t))
	if len(docs) != len(batch) {
		t.Fatalf("%d leaves stored, want %d", len(docs), len(batch))
	}
	for _, it := range batch {
		d := docs[keyOf(it.Key)]
		if d.Online != it.Online || d.Version != it.Version {
			t.Errorf("%s: stored online %d version %d, want %d %d", it.ID, d.Online, d.Version, it.Online, it.Version)
		}
	}
	if n, err := e.check.CountDocuments(context.Background(), bson.D{{Key: store.FieldVersion, Value: bson.D{{Key: "$ne", Value: int64(100)}}}}); err != nil || n != 0 {
		t.Errorf("%d leaves with another version, %v", n, err)
	}
}

// withOutcome returns a copy of m with the given keys set to o.
func withOutcome(m map[string]Outcome, keys []string, o Outcome) map[string]Outcome {
	out := make(map[string]Outcome, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		out[k] = o
	}
	return out
}
