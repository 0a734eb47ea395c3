package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestOplogSizeFlags: --oplog-size-mb (mongod) and --embedded-oplog-size-mb (serve) refuse a
// size outside 1 MiB to 1 TiB with a usage error naming the flag.
func TestOplogSizeFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"mongod zero", []string{"mongod", "--memory", "--listen", "127.0.0.1:0", "--oplog-size-mb", "0"}},
		{"mongod negative", []string{"mongod", "--memory", "--listen", "127.0.0.1:0", "--oplog-size-mb", "-1"}},
		{"mongod past 1 TiB", []string{"mongod", "--memory", "--listen", "127.0.0.1:0", "--oplog-size-mb", "1048577"}},
		{"serve zero", []string{"serve", "--demo", "--embedded-oplog-size-mb", "0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			err := run(t.Context(), &env{stdout: &out, stderr: &out}, tc.args)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "oplog-size-mb") {
				t.Fatalf("err %v, want a usage error naming the flag", err)
			}
		})
	}
}

// TestMongodOplogSize: `rollup mongod --oplog-size-mb 1` keeps about 1 MiB of oplog, seen from
// a client: a change stream resumed from before 3 MiB of writes has lost its history
// (ChangeStreamHistoryLost, as on a MongoDB whose oplog rolled over), and one resumed from
// the last write has not.
func TestMongodOplogSize(t *testing.T) {
	uri := startMongodChild(t, nil, "--oplog-size-mb", "1")
	ctx := t.Context()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	coll := client.Database("oplogtest").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	early := cs.ResumeToken()
	_ = cs.Close(ctx)
	pad := strings.Repeat("x", 10_000)
	docs := make([]any, 300) // 3 MB
	for i := range docs {
		docs[i] = bson.D{{Key: "n", Value: i + 1}, {Key: "pad", Value: pad}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	resume := func(tok bson.Raw) error {
		cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(tok).SetMaxAwaitTime(10*time.Millisecond))
		if err != nil {
			return err
		}
		defer func() { _ = cs.Close(context.WithoutCancel(ctx)) }()
		cs.TryNext(ctx)
		return cs.Err()
	}
	var se mongo.ServerError
	if err := resume(early); !errors.As(err, &se) || !se.HasErrorCode(286) {
		t.Fatalf("resume from before 3 MB of writes: %v, want ChangeStreamHistoryLost (286)", err)
	}
	cs, err = coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	late := cs.ResumeToken()
	_ = cs.Close(ctx)
	if err := resume(late); err != nil {
		t.Fatalf("resume from the last write: %v", err)
	}
}
