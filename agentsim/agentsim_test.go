package agentsim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// fakeAPI records the submissions it receives and answers every item "applied".
type fakeAPI struct {
	mu   sync.Mutex
	reqs []apiv1.CountsRequest
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CountsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp}
	for i, c := range req.Counts {
		resp.Items = append(resp.Items, apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: apiv1.StatusApplied})
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func TestSubmitTickReportsEveryLeafOnce(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var leaves []Leaf
	for i := range 103 {
		leaves = append(leaves, Leaf{ID: fmt.Sprintf("p%03d", i), Type: "process"})
	}
	tick := time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	observed := tick.Add(30 * time.Second)
	sim := New(Config{
		Client:  &agentclient.Client{BaseURL: srv.URL, Token: "t"},
		Project: "demo", Leaves: leaves, Agents: 7, Seed: 42,
	})
	if err := sim.SubmitTick(context.Background(), tick, observed, 0); err != nil {
		t.Fatal(err)
	}
	if len(api.reqs) != 7 {
		t.Fatalf("%d submissions, want one per agent (7)", len(api.reqs))
	}
	seen := map[string]int64{}
	for _, r := range api.reqs {
		if r.Project != "demo" || !r.Timestamp.Equal(tick) || r.ObservedAt == nil || !r.ObservedAt.Equal(observed) {
			t.Fatalf("submission header = %+v", r)
		}
		for _, c := range r.Counts {
			if _, dup := seen[c.ID]; dup {
				t.Fatalf("leaf %s submitted twice in one tick", c.ID)
			}
			seen[c.ID] = c.Online
		}
	}
	if len(seen) != len(leaves) {
		t.Fatalf("%d leaves reported, want %d", len(seen), len(leaves))
	}
	for i, l := range leaves {
		if want := Online(42, i, observed); seen[l.ID] != want {
			t.Fatalf("leaf %s online %d, want the deterministic %d", l.ID, seen[l.ID], want)
		}
	}
}

func TestOnlineIsDeterministicAndBounded(t *testing.T) {
	base := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	for i := range 50 {
		for m := 0; m < 24*60; m += 37 {
			at := base.Add(time.Duration(m) * time.Minute)
			v := Online(7, i, at)
			if v < 0 || v > 110 {
				t.Fatalf("Online(7, %d, %v) = %d, outside [0, 110]", i, at, v)
			}
			if v != Online(7, i, at) {
				t.Fatal("Online is not deterministic")
			}
		}
	}
	if Online(1, 3, base) == Online(2, 3, base) && Online(1, 4, base) == Online(2, 4, base) && Online(1, 5, base) == Online(2, 5, base) {
		t.Fatal("the seed does not change the counts")
	}
}

func TestLeavesOf(t *testing.T) {
	tr, err := tree.Build("p", tree.Generate("p", 2, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	got := LeavesOf(tr)
	if len(got) != 4 || got[0] != (Leaf{ID: "g01-s0001-p01", Type: "process"}) {
		t.Fatalf("leaves %v", got)
	}
}
