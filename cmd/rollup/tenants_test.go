package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// tenantNodes is a small tree of project whose ids start with prefix, plus extra leaves.
func tenantNodes(project, prefix string, extra ...string) []tree.Node {
	nodes := []tree.Node{{ID: prefix + "root", Type: "project"}, {ID: prefix + "g1", Type: "group", Parent: prefix + "root"}}
	for _, l := range append([]string{prefix + "l1", prefix + "l2"}, extra...) {
		nodes = append(nodes, tree.Node{ID: l, Type: "process", Parent: prefix + "g1"})
	}
	return nodes
}

// TestTenantIsolation runs `rollup serve` with two projects, pa and pb, and a token of each.
// pa's token cannot change pb's data: a submission naming a node of pb's tree is refused
// (403, naming the item, nothing written); a key pb already holds outside any tree is
// rejected per item by the bulk writer; pb's stored leaves stay untouched and `rollup verify`
// finds both projects clean; pa's own writes are unaffected. Nor can it read pb's data: pb's
// nodes are unknown to pa's read API, and a pb document under a key of pa's tree is not shown.
func TestTenantIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a rollup process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	storeAddr, apiAddr := freeAddr(t), freeAddr(t)
	uri := "mongodb://" + storeAddr + "/?replicaSet=rs0"
	child := startServe(t, dir, storeAddr, apiAddr)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	db := client.Database(store.DefaultDatabase)
	counts := db.Collection(store.CountsCollection)

	tick := tree.AlignTick(time.Now().UTC(), tree.DefaultTick).Add(-tree.DefaultTick)
	// "shared" is in pa's tree; pb wrote a count for it (an orphan of pb's) before pa's tree
	// claimed it. "loose" is in no tree and pb writes it first.
	trees := treedb.New(db)
	if _, err := trees.Import(ctx, "pa", tenantNodes("pa", "a-", "shared"), tick.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := trees.Import(ctx, "pb", tenantNodes("pb", "b-"), tick.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	tokA, err := api.CreateToken(ctx, db, "pa", "agent")
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := api.CreateToken(ctx, db, "pb", "agent")
	if err != nil {
		t.Fatal(err)
	}
	seedOrphan(ctx, t, counts, bulk.Item{Key: bulk.Key{ID: "shared", Type: "process", Timestamp: tick}, Project: "pb", Online: 55, Version: 1, SubmissionID: "pb-early"})

	post := func(token, project string, observed time.Time, cs ...apiv1.Count) (int, []byte) {
		body, err := json.Marshal(apiv1.CountsRequest{Project: project, Timestamp: tick, ObservedAt: &observed,
			SubmissionID: fmt.Sprintf("%s-%d", project, observed.UnixNano()), Counts: cs})
		if err != nil {
			t.Fatal(err)
		}
		return request(ctx, t, http.MethodPost, child.apiURL+apiv1.CountsPath, token, body)
	}
	now := time.Now()
	if status, body := post(tokB, "pb", now, apiv1.Count{ID: "b-l1", Type: "process", Online: 5}, apiv1.Count{ID: "b-l2", Type: "process", Online: 6},
		apiv1.Count{ID: "loose", Type: "process", Online: 7}); status != http.StatusOK {
		t.Fatalf("pb's own counts: %d %s", status, body)
	}
	victim := leafOf(ctx, t, counts, "b-l1", tick)

	// A node of pb's tree, in any type: 403 naming the item, nothing of the request written.
	for _, typ := range []string{"process", "server"} {
		status, body := post(tokA, "pa", now.Add(time.Second), apiv1.Count{ID: "a-l1", Type: "process", Online: 1},
			apiv1.Count{ID: "b-l1", Type: typ, Online: 999999})
		var e apiv1.ErrorResponse
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		if status != http.StatusForbidden || len(e.Errors) != 1 || e.Errors[0].Field != "counts[1].id" || e.Errors[0].Index == nil ||
			*e.Errors[0].Index != 1 || !strings.Contains(e.Errors[0].Message, "another project") || strings.Contains(string(body), "pb") {
			t.Fatalf("pa writing pb's node as %s: %d %s", typ, status, body)
		}
	}
	if n, err := counts.CountDocuments(ctx, bson.D{{Key: "project", Value: "pa"}}); err != nil || n != 0 {
		t.Fatalf("a refused request wrote %d documents (%v)", n, err)
	}

	// Keys pb holds outside pa's view of pb's tree: rejected per item by the writer's guard;
	// pa's own items in the same request are applied.
	status, body := post(tokA, "pa", now.Add(2*time.Second), apiv1.Count{ID: "a-l1", Type: "process", Online: 1},
		apiv1.Count{ID: "a-l2", Type: "process", Online: 2}, apiv1.Count{ID: "loose", Type: "process", Online: 999999},
		apiv1.Count{ID: "shared", Type: "process", Online: 999999})
	var resp apiv1.CountsResponse
	if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusOK {
		t.Fatalf("pa's request: %d %s", status, body)
	}
	if resp.Summary != (apiv1.Summary{Applied: 2, Rejected: 2}) || resp.Items[2].Status != apiv1.StatusRejected ||
		resp.Items[3].Status != apiv1.StatusRejected || !strings.Contains(resp.Items[2].Error, "another project") || strings.Contains(string(body), "pb") {
		t.Fatalf("pa's request: %s", body)
	}
	if got := leafOf(ctx, t, counts, "b-l1", tick); got != victim {
		t.Fatalf("pb's leaf changed: %+v, was %+v", got, victim)
	}
	for _, id := range []string{"loose", "shared"} {
		if got := leafOf(ctx, t, counts, id, tick); got.Project != "pb" || got.Online == 999999 {
			t.Fatalf("pb's %s became %+v", id, got)
		}
	}

	// Both projects verify clean once the watcher has rolled them up.
	window := []string{"--from", tick.Format(time.RFC3339), "--to", tick.Add(tree.DefaultTick).Format(time.RFC3339),
		"--mongodb-uri", uri, "--database", store.DefaultDatabase}
	for _, project := range []string{"pb", "pa"} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			var out strings.Builder
			err := run(ctx, &env{stdout: &out, stderr: io.Discard}, append([]string{"verify", "--project", project}, window...))
			if err == nil && strings.Contains(out.String(), "no violations") && parentOnline(ctx, t, counts, project, tick) >= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("verify --project %s: %v\n%s", project, err, out.String())
			}
			time.Sleep(100 * time.Millisecond) // polling with a deadline while the watcher rolls up
		}
	}
	if got, want := parentOnline(ctx, t, counts, "pb", tick), int64(5+6); got != want {
		t.Fatalf("pb's root total %d, want %d", got, want)
	}
	if got, want := parentOnline(ctx, t, counts, "pa", tick), int64(1+2); got != want {
		t.Fatalf("pa's root total %d, want %d (pb's count of shared must not be in it)", got, want)
	}

	// Reads: pb's nodes are unknown to pa; pb's document under pa's "shared" is not pa's.
	q := url.Values{"node": {"b-l1"}, "from": {tick.Format(time.RFC3339)}, "to": {tick.Add(tree.DefaultTick).Format(time.RFC3339)}}
	if status, body := request(ctx, t, http.MethodGet, child.apiURL+apiv1.ProjectsPath+"/pa"+apiv1.SeriesPath+"?"+q.Encode(), tokA, nil); status != http.StatusNotFound {
		t.Fatalf("pa reading pb's node: %d %s", status, body)
	}
	q.Set("node", "shared")
	status, body = request(ctx, t, http.MethodGet, child.apiURL+apiv1.ProjectsPath+"/pa"+apiv1.SeriesPath+"?"+q.Encode(), tokA, nil)
	var series apiv1.SeriesResponse
	if err := json.Unmarshal(body, &series); err != nil || status != http.StatusOK || len(series.Points) != 1 || series.Points[0].Online != nil {
		t.Fatalf("pa's series of shared shows another project's count: %d %s", status, body)
	}
	status, body = request(ctx, t, http.MethodGet, child.apiURL+apiv1.ProjectsPath+"/pa"+apiv1.TreePath+"?tick="+url.QueryEscape(tick.Format(time.RFC3339)), tokA, nil)
	if status != http.StatusOK || strings.Contains(string(body), "b-l") || strings.Contains(string(body), "loose") || strings.Contains(string(body), "55") {
		t.Fatalf("pa's tree shows pb's data: %d %s", status, body)
	}
}

// seedOrphan writes one leaf through a bulk writer, as the API would have before the trees
// changed.
func seedOrphan(ctx context.Context, t *testing.T, counts *mongo.Collection, it bulk.Item) {
	t.Helper()
	w := bulk.New(counts, bulk.Options{}, nil)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	res, err := w.Submit(ctx, []bulk.Item{it})
	cancel()
	if rerr := <-done; rerr != nil || err != nil || res[0].Outcome != bulk.OutcomeApplied {
		t.Fatalf("seed %s: %v %v %+v", it.ID, rerr, err, res)
	}
}

type storedLeaf struct {
	Project string `bson:"project"`
	Online  int64  `bson:"online"`
	Version int64  `bson:"version"`
	Sub     string `bson:"submission_id"`
}

func leafOf(ctx context.Context, t *testing.T, counts *mongo.Collection, id string, tick time.Time) storedLeaf {
	t.Helper()
	var d storedLeaf
	if err := counts.FindOne(ctx, bson.D{{Key: "id", Value: id}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: tick}}).Decode(&d); err != nil {
		t.Fatalf("leaf %s: %v", id, err)
	}
	return d
}

// parentOnline returns the online total of project's root document at tick, -1 when absent.
func parentOnline(ctx context.Context, t *testing.T, counts *mongo.Collection, project string, tick time.Time) int64 {
	t.Helper()
	root := map[string]string{"pa": "a-root", "pb": "b-root"}[project]
	var d struct {
		Online int64 `bson:"online"`
	}
	err := counts.FindOne(ctx, bson.D{{Key: "id", Value: root}, {Key: "timestamp", Value: tick}, {Key: "project", Value: project}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return d.Online
}

func request(ctx context.Context, t *testing.T, method, u, token string, body []byte) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
