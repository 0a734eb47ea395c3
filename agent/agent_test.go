package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/internal/testctx"
)

// funcSource is a Source over a function.
type funcSource struct {
	name   string
	leaves []string
	read   func() (Values, error)
}

func (s *funcSource) Name() string                                    { return s.name }
func (s *funcSource) Leaves() []string                                { return s.leaves }
func (s *funcSource) Read(context.Context, time.Time) (Values, error) { return s.read() }

// fakeAPI answers every request with status (200: every item applied, or rejected when
// rejectItems) and records the ticks it was sent.
type fakeAPI struct {
	mu          sync.Mutex
	status      int
	errCode     string
	rejectItems bool
	ticks       []time.Time
	ids         []string // every request's leaf ids
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req apiv1.CountsRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.ticks = append(f.ticks, req.Timestamp)
	for _, c := range req.Counts {
		f.ids = append(f.ids, c.ID)
	}
	w.Header().Set("Content-Type", "application/json")
	if f.status != http.StatusOK {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(f.status)
		_ = json.NewEncoder(w).Encode(apiv1.ErrorResponse{Error: f.errCode, Message: "test"})
		return
	}
	resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp}
	for i, c := range req.Counts {
		st := apiv1.StatusApplied
		if f.rejectItems {
			st = apiv1.StatusRejected
		}
		resp.Items = append(resp.Items, apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: st, Error: "test"})
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (f *fakeAPI) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, t := range f.ticks {
		out = append(out, t.UTC().Format("15:04"))
	}
	return out
}

// newTestAgent is an agent over a new spool in dir, sending to url, on a fake clock at now.
func newTestAgent(t *testing.T, url string, now time.Time, log *zap.Logger) (*Agent, *fakeClock) {
	t.Helper()
	sp, err := OpenSpool(t.TempDir(), 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: now}
	return New(Options{Spool: sp, Logger: log, Clock: clock, Settings: Settings{
		Client:  &agentclient.Client{BaseURL: url, Token: "tok", MaxAttempts: 1},
		Project: "p", Tick: 5 * time.Minute, Interval: 5 * time.Minute, Window: 24 * time.Hour, NoJitter: true,
	}}), clock
}

// TestFlushOutcomes: what a send's answer does to the spooled tick. 200 removes it (rejected
// items are final too); 503, 429, 401 and no answer keep it and stop the flush (the newer tick
// waits behind it); 400, 413 and 422 drop it for good; a tick past the window or with a
// corrupt file is dropped without a request.
func TestFlushOutcomes(t *testing.T) {
	tests := []struct {
		name        string
		status      int // 0: no answer
		errCode     string
		rejectItems bool
		late        bool // the clock is 25 h after the ticks
		corrupt     bool // the oldest tick's file is damaged
		wantSent    string
		wantLeft    string
		wantBlocked bool
		wantStats   string
	}{
		{name: "200", status: 200, wantSent: "[10:00 10:05]", wantLeft: "[]", wantStats: "items applied=2"},
		{name: "200 rejected items", status: 200, rejectItems: true, wantSent: "[10:00 10:05]", wantLeft: "[]", wantStats: "items rejected=2"},
		{name: "503", status: 503, errCode: apiv1.ErrUnavailable, wantSent: "[10:00]", wantLeft: "[10:00 10:05]", wantBlocked: true, wantStats: "errors 503=1"},
		{name: "429", status: 429, wantSent: "[10:00]", wantLeft: "[10:00 10:05]", wantBlocked: true, wantStats: "errors 429=1"},
		{name: "401", status: 401, errCode: apiv1.ErrUnauthorized, wantSent: "[10:00]", wantLeft: "[10:00 10:05]", wantBlocked: true, wantStats: "errors 401=1"},
		{name: "no answer", status: 0, wantSent: "[]", wantLeft: "[10:00 10:05]", wantBlocked: true, wantStats: "errors network=1"},
		{name: "400", status: 400, errCode: apiv1.ErrInvalidItem, wantSent: "[10:00 10:05]", wantLeft: "[]", wantStats: "errors 400=2 dropped rejected=2"},
		{name: "413", status: 413, errCode: apiv1.ErrTooManyItems, wantSent: "[10:00 10:05]", wantLeft: "[]", wantStats: "errors 413=2 dropped rejected=2"},
		{name: "422 out of window", status: 422, errCode: apiv1.ErrOutOfWindow, wantSent: "[10:00 10:05]", wantLeft: "[]", wantStats: "errors 422=2 dropped expired=2"},
		{name: "past the window", status: 200, late: true, wantSent: "[]", wantLeft: "[]", wantStats: "dropped expired=2"},
		{name: "corrupt file", status: 200, corrupt: true, wantSent: "[10:05]", wantLeft: "[]", wantStats: "items applied=1 dropped corrupt=1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{status: tc.status, errCode: tc.errCode, rejectItems: tc.rejectItems}
			srv := httptest.NewServer(api)
			defer srv.Close()
			if tc.status == 0 {
				srv.Close()
			}
			now := t0.Add(6 * time.Minute)
			if tc.late {
				now = t0.Add(25 * time.Hour)
			}
			a, _ := newTestAgent(t, srv.URL, now, zaptest.NewLogger(t))
			for i := range 2 {
				if _, err := a.spool.Append(rec(i, time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.corrupt {
				if err := os.WriteFile(filepath.Join(a.spool.dir, a.spool.Entries()[0].Name), []byte("torn"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f := a.flush(testctx.Context(t))
			if got := fmt.Sprint(api.sent()); got != tc.wantSent {
				t.Errorf("sent %s, want %s", got, tc.wantSent)
			}
			if got := fmt.Sprint(ticksOf(a.spool.Entries())); got != tc.wantLeft {
				t.Errorf("left in the spool %s, want %s", got, tc.wantLeft)
			}
			if f.blocked != tc.wantBlocked {
				t.Errorf("blocked %v (%v), want %v", f.blocked, f.err, tc.wantBlocked)
			}
			if tc.status == 503 && f.retryAfter != 7*time.Second {
				t.Errorf("retry after %s, want the server's 7s", f.retryAfter)
			}
			if got := statsLine(a.Stats().Snapshot()); got != tc.wantStats {
				t.Errorf("stats %q, want %q", got, tc.wantStats)
			}
		})
	}
}

// statsLine prints the counters a flush moves, in a fixed order.
func statsLine(s StatsSnapshot) string {
	var out []string
	add := func(what string, m map[string]int64, keys ...string) {
		line := ""
		for _, k := range keys {
			if m[k] > 0 {
				line += fmt.Sprintf(" %s=%d", k, m[k])
			}
		}
		if line != "" {
			out = append(out, what+line)
		}
	}
	add("items", s.Items, "applied", "stale", "rejected")
	add("errors", s.SendErrors, "400", "401", "413", "422", "429", "503", SendErrorNetwork)
	add("dropped", s.Dropped, DropFull, DropExpired, DropRejected, DropCorrupt)
	line := ""
	for i, o := range out {
		if i > 0 {
			line += " "
		}
		line += o
	}
	return line
}

// TestSampleTick: a failed source makes its leaves missing, a bad value its leaf; both are
// logged and counted, never sent as 0; with nothing readable no tick is spooled.
func TestSampleTick(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	a, _ := newTestAgent(t, "http://127.0.0.1:1", t0.Add(5*time.Minute+2*time.Second), zap.New(core))
	st := *a.settings.Load()
	st.Sources = []Source{
		&funcSource{name: "good", leaves: []string{"a", "b", "c"}, read: func() (Values, error) {
			return Values{Online: map[string]int64{"a": 0, "b": 4}, Bad: map[string]error{"c": errors.New("value 1.5 is not a whole number")}}, nil
		}},
		&funcSource{name: "down", leaves: []string{"d", "e"}, read: func() (Values, error) { return Values{}, errors.New("scrape: connection refused") }},
		&funcSource{name: "quiet", leaves: []string{"f"}, read: func() (Values, error) { return Values{Online: map[string]int64{"zz": 1}}, nil }},
	}
	st.Types = map[string]string{"good": "server"}
	a.settings.Store(&st)
	if err := a.SampleTick(testctx.Context(t)); err != nil {
		t.Fatal(err)
	}
	es := a.spool.Entries()
	if len(es) != 1 {
		t.Fatalf("spool %v", es)
	}
	r, err := a.spool.Load(es[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []agentclient.Count{{ID: "a", Type: "server", Online: 0}, {ID: "b", Type: "server", Online: 4}}
	if fmt.Sprint(r.Counts) != fmt.Sprint(want) || !r.Timestamp.Equal(t0.Add(5*time.Minute)) || !r.ObservedAt.Equal(t0.Add(5*time.Minute+2*time.Second)) || r.SubmissionID == "" {
		t.Errorf("record %+v", r)
	}
	if got := a.Stats().Snapshot().LeafErrors; fmt.Sprint(got) != "map[down:2 good:1 quiet:1]" {
		t.Errorf("leaf errors %v", got)
	}
	for _, want := range []string{"leaf missing from this tick", "source failed: its leaves are missing from this tick"} {
		if logs.FilterMessage(want).Len() == 0 {
			t.Errorf("no log %q", want)
		}
	}
	if logs.FilterField(zap.String("leaf", "c")).Len() != 1 || logs.FilterField(zap.String("leaf", "f")).Len() != 1 {
		t.Errorf("want one line for leaf c and one for leaf f: %v", logs.All())
	}

	st.Sources = st.Sources[1:2]
	a.settings.Store(&st)
	if err := a.SampleTick(testctx.Context(t)); !errors.Is(err, errNoCounts) {
		t.Errorf("nothing readable: %v", err)
	}
	if n, _ := a.spool.Depth(); n != 1 {
		t.Errorf("%d ticks spooled, want still 1", n)
	}
}

// TestRunReload: a reload signal makes Run take the new settings; a refused one keeps the old
// and is counted.
func TestRunReload(t *testing.T) {
	api := &fakeAPI{status: 200}
	srv := httptest.NewServer(api)
	defer srv.Close()
	core, logs := observer.New(zap.InfoLevel)
	a, clock := newTestAgent(t, srv.URL, t0.Add(time.Second), zap.New(core))
	source := func(leaf string) []Source {
		return []Source{&funcSource{name: "s", leaves: []string{leaf}, read: func() (Values, error) {
			return Values{Online: map[string]int64{leaf: 1}}, nil
		}}}
	}
	st := *a.settings.Load()
	st.Sources = source("old")
	a.settings.Store(&st)
	reloads := make(chan os.Signal)
	var next func() (Settings, error)
	a.opts.Reloads, a.opts.Reload = reloads, func() (Settings, error) { return next() }
	rounds := make(chan struct{})
	ctx, cancel := context.WithCancel(testctx.Context(t))
	a.opts.hooks.afterRound = func() {
		select {
		case rounds <- struct{}{}:
		case <-ctx.Done():
		}
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-rounds // the spool sent at start

	tickWith := func(k int, reload func() (Settings, error)) {
		next = reload
		reloads <- os.Interrupt // any signal: Run has taken it once the send returns
		clock.Advance(t0.Add(time.Duration(k) * 5 * time.Minute))
		<-rounds
	}
	tickWith(1, func() (Settings, error) { return Settings{}, errors.New("agent config x: sources: bad") })
	newSt := st
	newSt.Sources = source("new")
	tickWith(2, func() (Settings, error) { return newSt, nil })

	if got := a.Stats().Snapshot().ReloadErrors; got != 1 {
		t.Errorf("reload errors %d, want 1", got)
	}
	if logs.FilterMessage("config reload refused: the running config stays").Len() != 1 || logs.FilterMessage("config reloaded").Len() != 1 {
		t.Errorf("logs %v", logs.All())
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if got := fmt.Sprint(api.ids); got != "[old new]" {
		t.Errorf("leaves sent %s, want [old new]: the refused reload kept the old source, the good one took the new", got)
	}
}
