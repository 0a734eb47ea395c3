package bulk

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// Bounds of the outage log's writes: each is canceled after outageWriteTimeout (a timer, not
// a context deadline: see "Client-side timeouts" in MONGODB-FACTS); a failed one is retried
// after a backoff doubling from a second up to maxOutageBackoff.
const (
	outageWriteTimeout = 5 * time.Second
	maxOutageBackoff   = 30 * time.Second
)

// OutageEventID is the key of the event of an outage that instance saw: one per instance and
// outage start, so a retried write stores it once (store.Events.RecordOnce). Two instances
// that see the same outage record two events, each with its own view; the read API merges
// overlapping outages into one annotation.
func OutageEventID(instance string, o Outage) string {
	return store.EventOutage + "/" + instance + "/" + o.Since.UTC().Format(time.RFC3339Nano)
}

// OutageEvent is the event recording o as instance saw it: for every project (Project "").
func OutageEvent(instance string, o Outage) store.Event {
	return store.Event{Kind: store.EventOutage, At: o.Since.UTC(), End: o.Until.UTC(), Title: "store outage",
		Text: fmt.Sprintf("instance %s refused writes for %s (store unavailable: %s)", instance,
			o.Until.Sub(o.Since).Round(time.Millisecond), o.Reason)}
}

// startOutageLog records every outage that ends (Options.RecordOutages) until the returned
// function is called; that function stops it and waits for it to return.
func (w *Writer) startOutageLog(ctx context.Context) (stop func()) {
	if !w.opts.RecordOutages {
		return func() {}
	}
	return startUntilStopped(ctx, w.logOutages)
}

// logOutages writes each outage that ends to the events collection of the writer's database,
// after the store came back, retrying a failed write with backoff (the store may be down
// again). When ctx ends it tries what is left once more, each write bounded as always, and
// logs what it could not record.
func (w *Writer) logOutages(ctx context.Context) {
	events := store.NewEvents(w.coll.Database())
	var pending []Outage
	backoff := time.Duration(0)
	for {
		var retry <-chan time.Time
		t := time.NewTimer(backoff)
		if len(pending) > 0 {
			retry = t.C
		}
		select {
		case <-ctx.Done():
			t.Stop()
			pending = w.recordOutages(context.WithoutCancel(ctx), events, append(pending, w.health.takeEnded()...))
			for _, o := range pending {
				w.log.Warn("store outage not recorded (stopping)", zap.Time("since", o.Since), zap.Time("until", o.Until))
			}
			return
		case <-w.health.ended:
		case <-retry:
		}
		t.Stop()
		pending = w.recordOutages(ctx, events, append(pending, w.health.takeEnded()...))
		if len(pending) > 0 {
			backoff = min(max(2*backoff, time.Second), maxOutageBackoff)
		} else {
			backoff = 0
		}
	}
}

// recordOutages writes os in order and returns those not written (from the first failure).
func (w *Writer) recordOutages(ctx context.Context, events store.Events, os []Outage) []Outage {
	for i, o := range os {
		wctx, cancel := context.WithCancel(ctx)
		t := time.AfterFunc(outageWriteTimeout, cancel)
		err := events.RecordOnce(wctx, OutageEventID(w.opts.Instance, o), OutageEvent(w.opts.Instance, o))
		t.Stop()
		cancel()
		if err != nil {
			w.log.Warn("could not record a store outage; retrying", zap.Time("since", o.Since), zap.Time("until", o.Until), zap.Error(err))
			return os[i:]
		}
	}
	return nil
}
