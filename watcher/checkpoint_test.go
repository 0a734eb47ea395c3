package watcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/lease"
)

// TestCheckpointTermFence: a checkpoint save of an older lease term fails with
// lease.ErrFenced — refused by the term, not by time — and the same term saves again.
func TestCheckpointTermFence(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tokRaw, err := bson.Marshal(bson.D{{Key: "_data", Value: "8200000001000000012B"}})
	if err != nil {
		t.Fatal(err)
	}
	newer := newCheckpoints(e.db, "w/p")
	newer.term = 7
	older := newer
	older.term = 6
	if _, err := newer.save(ctx, tokRaw, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := older.save(ctx, tokRaw, time.Now()); !errors.Is(err, lease.ErrFenced) {
		t.Fatalf("older term's checkpoint save = %v, want lease.ErrFenced", err)
	}
	if _, err := newer.save(ctx, tokRaw, time.Now()); err != nil {
		t.Fatalf("same term's save: %v", err)
	}
	if cp, ok, err := newer.load(ctx); err != nil || !ok || cp.ClusterTime.T != 1 {
		t.Fatalf("load = %+v %v %v", cp, ok, err)
	}
}
