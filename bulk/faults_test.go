package bulk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/internal/testctx"
)

// TestFaults drives the writer through the driver into fail points and checks outcomes, the
// stored state and how many update commands reached the store.
func TestFaults(t *testing.T) {
	times := func(n int) bson.D { return bson.D{{Key: "times", Value: n}} }
	cases := []struct {
		name    string
		timeout time.Duration // client-side timeout (CSOT), 0 = none
		attempt time.Duration // Options.AttemptTimeout
		mode    any
		data    bson.D
		// outcomes every item may end with
		allowed []Outcome
		// update commands of the batch that reach the store: at least min, at most max
		minUpdates, maxUpdates int
		// probes: the store is probed before the resend (at least one probe)
		probed      bool
		unavailable bool
	}{
		{
			name: "closeConnection once: the driver's retry applies everything once",
			mode: times(1), data: bson.D{{Key: "closeConnection", Value: true}},
			allowed: []Outcome{OutcomeApplied}, minUpdates: 2, maxUpdates: 2,
		},
		{
			name:    "NotWritablePrimary with RetryableWriteError once: the driver retries",
			mode:    times(1),
			data:    bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
			allowed: []Outcome{OutcomeApplied}, minUpdates: 2, maxUpdates: 2,
		},
		{
			name:    "NotWritablePrimary twice: the driver retries, a probe succeeds, the writer resends once",
			mode:    times(2),
			data:    bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
			allowed: []Outcome{OutcomeApplied}, minUpdates: 3, maxUpdates: 3, probed: true,
		},
		{
			// The writes happened but are not confirmed: the resend finds its own versions
			// stored (E11000), and the read of those documents reports stale.
			name:    "writeConcernError once: the writer resends the batch once",
			mode:    times(1),
			data:    bson.D{{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}},
			allowed: []Outcome{OutcomeStale}, minUpdates: 2, maxUpdates: 2, probed: true,
		},
		{
			name:    "blockConnection past the client timeout once: unknown outcome, the writer resends",
			timeout: 300 * time.Millisecond, mode: times(1),
			data:    bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1500}},
			allowed: []Outcome{OutcomeApplied, OutcomeStale}, minUpdates: 2, maxUpdates: 3, probed: true,
		},
		{
			name:    "blockConnection past the writer's attempt timeout once: the writer resends",
			attempt: 300 * time.Millisecond, mode: times(1),
			data:    bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1500}},
			allowed: []Outcome{OutcomeApplied, OutcomeStale}, minUpdates: 2, maxUpdates: 3, probed: true,
		},
		{
			name: "closeConnection always: the driver's retry, a failed probe, no resend: ErrUnavailable",
			mode: "alwaysOn", data: bson.D{{Key: "closeConnection", Value: true}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 2, maxUpdates: 2, probed: true, unavailable: true,
		},
		{
			name:    "NotWritablePrimary always: the driver's retry, a failed probe, no resend: ErrUnavailable",
			mode:    "alwaysOn",
			data:    bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 2, maxUpdates: 2, probed: true, unavailable: true,
		},
		{
			// With the attempt timeout as a context deadline, the driver retried until it
			// expired: thousands of commands in a few seconds (issue #12).
			name:    "NotWritablePrimary always under an attempt timeout: the driver retries once, not until the timeout",
			attempt: 10 * time.Second, mode: "alwaysOn",
			data:    bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 2, maxUpdates: 2, probed: true, unavailable: true,
		},
		{
			name:    "closeConnection always under an attempt timeout: the driver retries once",
			attempt: 10 * time.Second, mode: "alwaysOn", data: bson.D{{Key: "closeConnection", Value: true}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 2, maxUpdates: 2, probed: true, unavailable: true,
		},
		{
			name:    "blockConnection always past the writer's attempt timeout: one command, the probe blocks too",
			attempt: 300 * time.Millisecond, mode: "alwaysOn",
			data:    bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1500}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 1, maxUpdates: 1, probed: true, unavailable: true,
		},
		{
			name:    "writeConcernError always: the probe fails too, no resend: ErrUnavailable",
			mode:    "alwaysOn",
			data:    bson.D{{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 1, maxUpdates: 1, probed: true, unavailable: true,
		},
		{
			// A client timeout (CSOT) lets the driver retry until it expires; the blocked
			// attempt uses it up. The probe blocks too: no resend.
			name:    "blockConnection always past the client timeout: fail fast with ErrUnavailable",
			timeout: 200 * time.Millisecond, mode: "alwaysOn",
			data:    bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1000}},
			allowed: []Outcome{OutcomeUnknown}, minUpdates: 1, maxUpdates: 2, probed: true, unavailable: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []*options.ClientOptions
			if tc.timeout > 0 {
				opts = append(opts, options.Client().SetTimeout(tc.timeout))
			}
			e := newEnv(t, opts...)
			w := startWriter(t, e.coll, Options{Workers: 1, AttemptTimeout: tc.attempt})
			var batch []Item
			for i := range 50 {
				batch = append(batch, item(fmt.Sprintf("n%02d", i), int64(i), 100))
			}
			// Warm the connection pool so the handshake is not what fails.
			if _, err := e.coll.CountDocuments(context.Background(), bson.D{}); err != nil {
				t.Fatal(err)
			}
			e.failPoint(t, tc.mode, tc.data)
			e.proxy.ResetStats()

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			res, err := w.Submit(ctx, batch)
			took := time.Since(start)
			if tc.unavailable != errors.Is(err, ErrUnavailable) {
				t.Fatalf("submit error %v, want unavailable=%v", err, tc.unavailable)
			}
			if !tc.unavailable && err != nil {
				t.Fatalf("submit: %v", err)
			}
			for i, r := range res {
				if !contains(tc.allowed, r.Outcome) {
					t.Fatalf("item %d: %v (%v), want one of %v", i, r.Outcome, r.Err, tc.allowed)
				}
				if r.Outcome == OutcomeUnknown && !errors.Is(r.Err, ErrUnavailable) {
					t.Fatalf("item %d: unknown outcome with error %v", i, r.Err)
				}
			}
			updates, probes := updateCounts(t, e.proxy)
			t.Logf("%d update commands and %d probes, submit took %v", updates, probes, took)
			if updates < tc.minUpdates || updates > tc.maxUpdates {
				t.Fatalf("%d update commands reached the store, want %d..%d", updates, tc.minUpdates, tc.maxUpdates)
			}
			if tc.probed != (probes > 0) {
				t.Fatalf("%d probes, want probed=%v", probes, tc.probed)
			}
			if tc.unavailable {
				if took > 10*time.Second {
					t.Fatalf("fail fast took %v", took)
				}
				return
			}
			docs := byKey(t, e.leaves(t))
			if len(docs) != len(batch) {
				t.Fatalf("%d leaves stored, want %d", len(docs), len(batch))
			}
			for _, it := range batch {
				d := docs[keyOf(it.Key)]
				if d.Online != it.Online || d.Version != it.Version {
					t.Fatalf("%s: stored %+v, want online %d version %d", it.ID, d, it.Online, it.Version)
				}
			}
		})
	}
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSaturatedStoreIsNotAnOutage: while slow commands hold every connection the client may
// open (here the only one, held by a find the store answers after 2 s: what a saturated
// store looks like, 1M leaves per tick), a batch cannot check a connection out within its
// attempt timeout, nor can the probe. That is a busy client, not a dead store: the batch's
// outcome is unknown, but the writer stays ready and refuses nothing afterwards. (Before, the
// starved probe declared an outage, ended every write in flight and refused every agent.)
func TestSaturatedStoreIsNotAnOutage(t *testing.T) {
	e := newEnv(t, options.Client().SetMaxPoolSize(1))
	w := startWriter(t, e.coll, Options{Workers: 1, AttemptTimeout: 300 * time.Millisecond, ProbeTimeout: 300 * time.Millisecond})
	if _, err := e.coll.CountDocuments(context.Background(), bson.D{}); err != nil {
		t.Fatal(err)
	}
	e.store.FailPoint(t, e.direct, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 2000}}}})
	e.proxy.ResetStats()
	held := make(chan error, 1)
	go func() { held <- e.coll.FindOne(context.Background(), bson.D{}).Err() }()
	testctx.WaitFor(t, "the slow find to hold the connection", func() bool { return len(e.proxy.Commands("find")) > 0 })
	ctx := testctx.Context(t)
	// The batch's outcome is unknown (ErrUnavailable: resend it) or, if the find freed the
	// connection in time, applied.
	res, err := w.Submit(ctx, []Item{item("slow", 1, 100)})
	switch {
	case err != nil && !errors.Is(err, ErrUnavailable):
		t.Fatalf("submit while the pool is held: %v", err)
	case err == nil && res[0].Outcome != OutcomeUnknown && res[0].Outcome != OutcomeApplied:
		t.Fatalf("the batch: %+v", res[0])
	}
	if st := w.Tracker().State(); !st.Ready {
		t.Fatalf("the writer took a busy client for a down store: %+v", st)
	}
	if err := <-held; err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		t.Fatalf("the slow find: %v", err)
	}
	if err := w.Available(ctx); err != nil {
		t.Fatalf("Available after the pool is free: %v", err)
	}
	res, err = w.Submit(ctx, []Item{item("next", 2, 100)})
	if err != nil || res[0].Outcome != OutcomeApplied {
		t.Fatalf("the next submission: %+v %v", res, err)
	}
}
