package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
)

// TestServeSizesWritesByStoreCores: serve's default leaf writes in flight follow the store's
// cores, not its own, and the live instances share them; an explicit --bulk-workers is
// neither. Seen from outside, on /metrics (rollup_bulk_writes_in_flight_limit): a store
// pinned to one core (taskset -c 0) has a budget of 2; serve processes told they have 16
// cores (GOMAXPROCS=16: their own default would be 8) keep 2 alone and 1 each once a second
// instance is live, and one with --bulk-workers 5 keeps 5. Against MONGODB_URI the budget is
// what that server's hostInfo says.
func TestServeSizesWritesByStoreCores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rollup processes")
	}
	t.Parallel()
	ctx := testctx.Context(t)
	uri, pinned := os.Getenv("MONGODB_URI"), false
	if uri == "" {
		var wrap []string
		if _, err := exec.LookPath("taskset"); err == nil {
			wrap, pinned = []string{"taskset", "-c", "0"}, true
		}
		uri = startMongodChild(t, wrap)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	cores, err := store.Cores(ctx, client)
	if err != nil {
		t.Fatalf("the store's cores: %v", err)
	}
	if pinned && cores != 1 {
		t.Fatalf("a store pinned to one core says it has %d", cores)
	}
	budget := store.WritesInFlightFor(cores)
	db := fmt.Sprintf("inflight_%d", time.Now().UnixNano())
	start := func(id string, extra ...string) *serveChild {
		t.Helper()
		c := launchServeEnv(t, []string{"GOMAXPROCS=16"}, append([]string{"--mongodb-uri", uri, "--database", db,
			"--instance-id", id, "--listen", "127.0.0.1:0", "--log-level", "warn"}, extra...)...)
		c.waitAPI(t)
		return c
	}
	waitLimit := func(c *serveChild, name string, want int) {
		t.Helper()
		waitUntil(t, 30*time.Second, fmt.Sprintf("%s keeping %d in flight", name, want), func() bool {
			got, ok := metricValue(c.apiURL, "rollup_bulk_writes_in_flight_limit")
			return ok && got == float64(want)
		})
	}
	a := start("a")
	waitLimit(a, "one instance alone", budget)
	b := start("b")
	waitLimit(a, "instance a beside b", (budget+1)/2)
	waitLimit(b, "instance b beside a", (budget+1)/2)
	c := start("c", "--bulk-workers", "5")
	waitLimit(c, "an instance with --bulk-workers 5", 5)
	waitLimit(a, "instance a among 3", (budget+2)/3)
	t.Logf("store on %d core(s): budget %d; alone %d, 2 instances %d each, 3 instances %d each", cores, budget, budget, (budget+1)/2, (budget+2)/3)
}
