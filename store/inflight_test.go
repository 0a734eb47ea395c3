package store

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

func TestWritesInFlightFor(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{
		{1, 2}, {2, 2}, {5, 2}, {6, 3}, {8, 4}, {15, 7}, {16, 8}, {64, 8},
	} {
		if got := WritesInFlightFor(tc.procs); got != tc.want {
			t.Errorf("WritesInFlightFor(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
}

// TestCores asks the store its cores through hostInfo, as serve does to size its writes in
// flight: the embedded server answers its CPU affinity (against a real MongoDB, any count of
// at least 1). A refused hostInfo (here a failCommand, as a user without the privilege gets
// 13 Unauthorized) is an error naming the command, not a guess.
func TestCores(t *testing.T) {
	srv := embeddedtest.Start(t)
	const app = "store-cores"
	c := srv.Client(t, options.Client().SetAppName(app))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Cores(ctx, c)
	if err != nil {
		t.Fatalf("Cores: %v", err)
	}
	if want := min(runtime.NumCPU(), runtime.GOMAXPROCS(0)); n < 1 || (!srv.Real() && n != want) {
		t.Errorf("Cores = %d, want the store's CPUs (%d here)", n, want)
	}
	srv.FailPoint(t, c, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: int32(1)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"hostInfo"}}, {Key: "errorCode", Value: int32(13)}, {Key: "appName", Value: app}}}})
	if n, err := Cores(ctx, c); err == nil || !strings.Contains(err.Error(), "hostInfo") {
		t.Errorf("Cores with hostInfo refused = %d, %v; want an error naming hostInfo", n, err)
	}
}
