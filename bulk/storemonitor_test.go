package bulk

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/address"

	"github.com/gameops/rollup/internal/testctx"
)

// topo is a topology description whose servers have the given kinds.
func topo(kind string, servers ...string) *event.TopologyDescriptionChangedEvent {
	d := event.TopologyDescription{Kind: kind}
	for i, k := range servers {
		d.Servers = append(d.Servers, event.ServerDescription{Addr: address.Address("db" + string(rune('1'+i)) + ":27017"), Kind: k})
	}
	return &event.TopologyDescriptionChangedEvent{NewDescription: d}
}

// TestWritableTopology: a topology takes writes when it has a primary, a standalone, a mongos
// or is load balanced; otherwise the reason lists what the driver sees.
func TestWritableTopology(t *testing.T) {
	for _, c := range []struct {
		kind    string
		servers []string
		want    bool
		reason  string
	}{
		{"ReplicaSetWithPrimary", []string{"RSSecondary", "RSPrimary"}, true, ""},
		{"Single", []string{"Standalone"}, true, ""},
		{"Sharded", []string{"Unknown", "Mongos"}, true, ""},
		{"LoadBalanced", nil, true, ""},
		{"ReplicaSetNoPrimary", []string{"RSSecondary", "Unknown"}, false, "no writable server (the driver sees: db1:27017 RSSecondary, db2:27017 Unknown)"},
		{"Single", []string{"Unknown"}, false, "no writable server (the driver sees: db1:27017 Unknown)"},
		{"Unknown", nil, false, "no writable server (the driver sees: )"},
	} {
		got, reason := writableTopology(topo(c.kind, c.servers...).NewDescription)
		if got != c.want || reason != c.reason {
			t.Errorf("%s %v: %v %q, want %v %q", c.kind, c.servers, got, reason, c.want, c.reason)
		}
	}
}

// monitorCalls records what a StoreMonitor tells its subscriber.
type monitorCalls struct {
	mu    sync.Mutex
	calls []bool
}

func (m *monitorCalls) record(writable bool, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, writable)
}

func (m *monitorCalls) get() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.calls...)
}

// TestStoreMonitorGrace: a blip shorter than the grace period is not reported (neither its
// start nor its end); a longer loss of every writable server is, once; a writable server
// again is then reported at once.
func TestStoreMonitorGrace(t *testing.T) {
	const grace = 50 * time.Millisecond
	m := NewStoreMonitor(grace)
	var calls monitorCalls
	m.subscribe(calls.record)
	sm := m.ServerMonitor()
	if !m.Writable() {
		t.Fatal("not writable before any description")
	}
	sm.TopologyDescriptionChanged(topo("Single", "Standalone"))
	sm.TopologyDescriptionChanged(topo("Single", "Unknown")) // a blip
	if m.Writable() {
		t.Fatal("writable with an unknown server")
	}
	sm.TopologyDescriptionChanged(topo("Single", "Standalone"))
	waitPast(2 * grace)
	if got := calls.get(); len(got) != 0 {
		t.Fatalf("after a blip: %v, want no call", got)
	}

	start := time.Now()
	sm.TopologyDescriptionChanged(topo("Single", "Unknown"))
	sm.TopologyDescriptionChanged(topo("Single", "Unknown")) // still down: no new timer
	testctx.WaitFor(t, "the condition", func() bool { return len(calls.get()) == 1 })
	if took := time.Since(start); took < grace {
		t.Fatalf("reported after %v, before the grace of %v", took, grace)
	}
	waitPast(grace)
	if got := calls.get(); len(got) != 1 || got[0] {
		t.Fatalf("after an outage: %v, want one unwritable call", got)
	}
	sm.TopologyDescriptionChanged(topo("Single", "Standalone"))
	testctx.WaitFor(t, "the condition", func() bool { return len(calls.get()) == 2 })
	if got := calls.get(); !got[1] || !m.Writable() {
		t.Fatalf("back: %v", got)
	}
	// The next blip is again not reported.
	sm.TopologyDescriptionChanged(topo("Single", "Unknown"))
	sm.TopologyDescriptionChanged(topo("Single", "Standalone"))
	waitPast(2 * grace)
	if got := calls.get(); len(got) != 2 {
		t.Fatalf("after a second blip: %v", got)
	}
}

// waitPast waits d, for checks that something did not happen within it.
func waitPast(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

// TestHealthFollowsStoreMonitor: once the monitor reports no writable server, the store is
// down at once and the writes in flight are canceled; when it sees a writable server again,
// the prober probes at once (not at its next interval) and the store is up.
func TestHealthFollowsStoreMonitor(t *testing.T) {
	p := &fakeProbe{}
	p.set(errStore, nil)
	h := newTestHealth(t, p, time.Hour) // the prober's own interval never comes
	m := NewStoreMonitor(10 * time.Millisecond)
	h.watch(m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	actx, acancel := context.WithCancelCause(context.Background())
	untrack := h.track(func() { acancel(errStoreDown) })
	sm := m.ServerMonitor()
	sm.TopologyDescriptionChanged(topo("Single", "Unknown"))
	select {
	case <-actx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the write in flight was not canceled")
	}
	untrack()
	if !errors.Is(context.Cause(actx), errStoreDown) || h.up() || h.tracker.State().Ready {
		t.Fatalf("cause %v, up %v", context.Cause(actx), h.up())
	}
	// A write that starts while the store is down is canceled at once.
	bctx, bcancel := context.WithCancel(context.Background())
	h.track(bcancel)()
	if bctx.Err() == nil {
		t.Fatal("a write started during the outage was not canceled")
	}

	p.set(nil, nil)
	before := p.calls.Load()
	sm.TopologyDescriptionChanged(topo("Single", "Standalone"))
	testctx.WaitFor(t, "the store to be up", h.up)
	if p.calls.Load() == before {
		t.Fatal("up without a probe")
	}
	// Once the monitor reported the store back, a check does not wait for the probe slot
	// (an hour away here).
	h.failed(errStore)
	h.topology(true, "")
	h.mu.Lock()
	h.lastProbe = time.Now()
	h.mu.Unlock()
	start := time.Now()
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("check: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("check took %v", took)
	}
}
