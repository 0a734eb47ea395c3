package bulk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
)

// TestStoreDownGate: a batch that meets NotWritablePrimary on every update ends unavailable
// after the driver's one retry and a failed probe (no resend); from then on the writer knows
// the store is down: Submits, whatever their size, are refused after one probe without any
// batch reaching the store, the tracker and the stats say so, and the first Submit after the
// fault ends is written.
func TestStoreDownGate(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{Workers: 1})
	testctx.WaitFor(t, "the writer to be ready", func() bool { return w.Tracker().State().Ready }) // once Run started
	if st := w.Tracker().State(); st.Component != "bulk" {
		t.Fatalf("tracker of a running writer: %+v", st)
	}
	nwp := bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}
	e.failPoint(t, "alwaysOn", nwp)
	e.proxy.ResetStats()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	batch := func(prefix string, n int, version int64) []Item {
		out := make([]Item, n)
		for i := range out {
			out[i] = item(fmt.Sprintf("%s%05d", prefix, i), int64(i), version)
		}
		return out
	}
	if _, err := w.Submit(ctx, batch("a", 20, 1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first submit: %v, want ErrUnavailable", err)
	}
	if writes, probes := updateCounts(t, e.proxy); writes != 2 || probes < 1 {
		t.Fatalf("first submit: %d update commands and %d probes, want 2 (attempt, driver retry) and a probe", writes, probes)
	}
	st := w.Tracker().State()
	if st.Ready || st.Reason == "" {
		t.Fatalf("tracker during the outage: %+v", st)
	}
	if s := w.Stats(); !s.StoreDown || s.DownSince.IsZero() {
		t.Fatalf("stats during the outage: down %v since %v", s.StoreDown, s.DownSince)
	}
	if ra := w.RetryAfter(); ra < time.Second || ra > 1500*time.Millisecond {
		t.Fatalf("RetryAfter at the start of the outage = %v, want 1s–1.5s", ra)
	}

	for _, n := range []int{20, 3000, 10_000} {
		start := time.Now()
		res, err := w.Submit(ctx, batch("b", n, 2))
		var down *StoreDownError
		if !errors.As(err, &down) || !errors.Is(err, ErrUnavailable) || res != nil {
			t.Fatalf("%d items during the outage: %v (%d results), want a *StoreDownError", n, err, len(res))
		}
		t.Logf("%d items refused after %v: %v", n, time.Since(start), err)
	}
	if writes, _ := updateCounts(t, e.proxy); writes != 2 {
		t.Fatalf("%d batch updates reached the store, want only the first batch's 2", writes)
	}
	if s := w.Stats(); s.Refused != 13_020 || s.ProbesFailed < 4 {
		t.Fatalf("refused %d items after %d failed probes, want 13020 after at least 4", s.Refused, s.ProbesFailed)
	}

	e.failPoint(t, "off", nil)
	res := submit(t, w, batch("c", 20, 3))
	for i, r := range res {
		if r.Outcome != OutcomeApplied {
			t.Fatalf("after the outage: item %d %v (%v)", i, r.Outcome, r.Err)
		}
	}
	if st := w.Tracker().State(); !st.Ready {
		t.Fatalf("tracker after the outage: %+v", st)
	}
	if s := w.Stats(); s.StoreDown || s.ProbesOK < 1 || w.RetryAfter() != 0 {
		t.Fatalf("stats after the outage: down %v, %d probes ok, RetryAfter %v", s.StoreDown, s.ProbesOK, w.RetryAfter())
	}
}

// TestOutageRecorded: with RecordOutages, an outage the writer saw (a fault on every update,
// then none) is recorded once the store takes writes again: one outage event for every
// project, from when the writer began refusing writes to when a write or probe succeeded,
// naming the instance. Recording it again (a retry) stores nothing more; another instance's
// view of the same outage is its own event.
func TestOutageRecorded(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{Workers: 1, RecordOutages: true, Instance: "pod-a"})
	testctx.WaitFor(t, "the writer to be ready", func() bool { return w.Tracker().State().Ready })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.failPoint(t, "alwaysOn", bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}})
	before := time.Now()
	if _, err := w.Submit(ctx, []Item{item("a", 1, 1)}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit during the fault: %v, want ErrUnavailable", err)
	}
	down, since := w.health.state()
	if !down {
		t.Fatal("the writer does not know the store is down")
	}
	events := e.check.Database().Collection(store.EventsCollection)
	if n, err := events.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d events during the outage (%v), want none", n, err)
	}
	e.failPoint(t, "off", nil)
	submit(t, w, []Item{item("a", 1, 2)})
	after := time.Now()

	var got []struct {
		ID          string `bson:"_id"`
		store.Event `bson:",inline"`
	}
	testctx.WaitFor(t, "the outage to be recorded", func() bool {
		cur, err := events.Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("events %+v, want one outage", got)
	}
	ev := got[0]
	if ev.Kind != store.EventOutage || ev.Project != "" || !ev.At.Equal(since.UTC().Truncate(time.Millisecond)) || ev.At.Before(before.Truncate(time.Millisecond)) ||
		!ev.End.After(ev.At) || ev.End.After(after) || !strings.Contains(ev.Text, "pod-a") || ev.ID != OutageEventID("pod-a", Outage{Since: since}) {
		t.Fatalf("outage event %+v; want kind outage, project \"\", from %v to before %v, naming pod-a", ev, since, after)
	}
	t.Logf("recorded: %s: %s", ev.Title, ev.Text)

	// A retry of the same record, and another instance's view of the outage.
	evs := store.NewEvents(e.check.Database())
	o := Outage{Since: since, Until: ev.End, Reason: "again"}
	for _, inst := range []string{"pod-a", "pod-a", "pod-b"} {
		if err := evs.RecordOnce(ctx, OutageEventID(inst, o), OutageEvent(inst, o)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := events.CountDocuments(ctx, bson.D{}); err != nil || n != 2 {
		t.Fatalf("%d events after a retry and another instance (%v), want 2", n, err)
	}
}

// TestOutageRecordRetried: when the outage's event cannot be written after the store came
// back (here its insert fails), the writer retries it with backoff until it is written, once.
func TestOutageRecordRetried(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.WarnLevel)
	w := New(e.coll, Options{Workers: 1, RecordOutages: true, Instance: "pod-a"}, zap.New(core))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	fail := func(cmds ...any) {
		e.store.FailPoint(t, e.direct, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A(cmds)},
				{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}}})
	}
	testctx.WaitFor(t, "the writer to be ready", func() bool { return w.Tracker().State().Ready })
	fail("update", "insert")
	if _, err := w.Submit(ctx, []Item{item("a", 1, 1)}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit during the fault: %v, want ErrUnavailable", err)
	}
	fail("insert") // the store takes the writer's updates again, not the event's insert
	submit(t, w, []Item{item("a", 1, 2)})
	testctx.WaitFor(t, "a failed attempt to record the outage", func() bool {
		return logs.FilterMessageSnippet("could not record a store outage").Len() > 0
	})
	events := e.check.Database().Collection(store.EventsCollection)
	if n, err := events.CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d events while their insert fails (%v)", n, err)
	}
	e.failPoint(t, "off", nil)
	testctx.WaitFor(t, "the outage recorded after a retry", func() bool {
		n, err := events.CountDocuments(ctx, bson.D{{Key: "kind", Value: store.EventOutage}})
		return err == nil && n == 1
	})
}
