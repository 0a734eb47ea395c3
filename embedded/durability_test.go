package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

// runServer starts a durable embedded server on dir and returns a function that stops it
// (cancels Run and waits for it to return).
func runServer(t *testing.T, dir string) (*embeddedtest.Store, func()) {
	t.Helper()
	srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &embeddedtest.Store{URI: srv.URI(), Server: srv}, stop
}

// connect returns a client of uri that is disconnected by the returned function (and at the
// end of the test).
func connect(t *testing.T, uri string, opts ...*options.ClientOptions) (*mongo.Client, func()) {
	t.Helper()
	o := append([]*options.ClientOptions{options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second), quickMonitor()}, opts...)
	c, err := mongo.Connect(o...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var once sync.Once
	disc := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.Disconnect(ctx)
		})
	}
	t.Cleanup(disc)
	return c, disc
}

func TestDurableRestart(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("checks embedded server internals")
	}
	dir := t.TempDir()
	ctx := ctxFor(t)

	store, stop := runServer(t, dir)
	c, disc := connect(t, store.URI)
	coll := c.Database("dur").Collection("events")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, Options: options.Index().SetUnique(true),
	}); err != nil {
		t.Fatalf("create index: %v", err)
	}
	var models []mongo.WriteModel
	for i := range int32(500) {
		models = append(models, mongo.NewUpdateOneModel().SetFilter(key(fmt.Sprintf("k%d", i%100), "p", i/100)).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: i}}}}).SetUpsert(true))
	}
	if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		t.Fatalf("bulk upsert: %v", err)
	}
	if _, err := coll.DeleteOne(ctx, key("k0", "p", 0)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := coll.UpdateOne(ctx, key("k1", "p", 0), bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1000}}}}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := c.Database("dur").CreateCollection(ctx, "empty"); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := c.Database("gone").Collection("x").InsertOne(ctx, bson.D{}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := c.Database("gone").Drop(ctx); err != nil {
		t.Fatalf("drop database: %v", err)
	}
	disc()
	stop()

	for round := range 2 { // restart twice: recovery of a recovered store
		store, stop = runServer(t, dir)
		c, disc = connect(t, store.URI)
		coll = c.Database("dur").Collection("events")
		if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 499 {
			t.Fatalf("round %d: count = %d, %v; want 499", round, n, err)
		}
		var k1 struct{ V int32 }
		if err := coll.FindOne(ctx, key("k1", "p", 0)).Decode(&k1); err != nil || k1.V != 1001 {
			t.Errorf("round %d: k1 = %+v, %v; want v 1001", round, k1, err)
		}
		if err := coll.FindOne(ctx, key("k0", "p", 0)).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
			t.Errorf("round %d: deleted doc: %v", round, err)
		}
		// The unique index survived: it is listed and enforced.
		var ixs []string
		specs, err := coll.Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatalf("list indexes: %v", err)
		}
		for _, s := range specs {
			ixs = append(ixs, s.Name)
		}
		if strings.Join(ixs, ",") != "_id_,"+keyIndexName {
			t.Errorf("round %d: indexes = %v", round, ixs)
		}
		if _, err := coll.InsertOne(ctx, key("k5", "p", 3)); !mongo.IsDuplicateKeyError(err) {
			t.Errorf("round %d: duplicate after restart: %v", round, err)
		}
		names, err := c.Database("dur").ListCollectionNames(ctx, bson.D{})
		if err != nil || len(names) != 2 {
			t.Errorf("round %d: collections = %v, %v", round, names, err)
		}
		if dbs, err := c.ListDatabaseNames(ctx, bson.D{{Key: "name", Value: "gone"}}); err != nil || len(dbs) != 0 {
			t.Errorf("round %d: dropped database is back: %v, %v", round, dbs, err)
		}
		disc()
		stop()
	}
}

// child is a durable embedded server in a subprocess (the test binary re-executed).
type child struct {
	cmd    *exec.Cmd
	uri    string
	stderr *bytes.Buffer
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	ch := &child{cmd: cmd, stderr: stderr}
	t.Cleanup(func() { ch.kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	uri, ok := strings.CutPrefix(strings.TrimSpace(line), "URI ")
	if err != nil || !ok {
		ch.kill()
		t.Fatalf("child did not print its URI (%q, %v); stderr: %s", line, err, stderr.String())
	}
	ch.uri = uri
	return ch
}

// kill SIGKILLs the child and reaps it.
func (ch *child) kill() {
	if ch.cmd.ProcessState != nil {
		return
	}
	_ = ch.cmd.Process.Kill()
	_ = ch.cmd.Wait()
}

// TestKill9Durability SIGKILLs a durable server while acknowledged unordered upsert batches
// are in flight and checks, after a restart on the same directory, that every acknowledged
// write is there.
func TestKill9Durability(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("checks embedded server internals")
	}
	dir := t.TempDir()
	ctx := ctxFor(t)
	const (
		batchSize  = 200
		keySpace   = 1500 // batches overlap on keys, so later batches overwrite earlier values
		killAfter  = 15   // acknowledged batches before the kill
		maxBatches = 1000
	)
	ch := startChild(t, dir)
	c, _ := connect(t, ch.uri, options.Client().SetRetryWrites(false))
	coll := c.Database("kill").Collection("events")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, Options: options.Index().SetUnique(true),
	}); err != nil {
		t.Fatalf("create index: %v", err)
	}

	// acked[key] is the value of the last acknowledged write of key; attempted is the number
	// of batches sent (acknowledged or not).
	acked := map[string]int32{}
	var attempted int32
	ackedBatches := make(chan int32, maxBatches)
	writerDone := make(chan error, 1)
	go func() {
		for b := int32(1); b <= maxBatches; b++ {
			attempted = b
			var models []mongo.WriteModel
			keys := make([]string, 0, batchSize)
			for j := range int32(batchSize) {
				k := fmt.Sprintf("k%d", (b*97+j*7)%keySpace)
				keys = append(keys, k)
				models = append(models, mongo.NewUpdateOneModel().SetFilter(key(k, "p", 1)).
					SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: b}}}}).SetUpsert(true))
			}
			if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
				writerDone <- err
				return
			}
			for _, k := range keys {
				acked[k] = b
			}
			ackedBatches <- b
		}
		writerDone <- nil
	}()
	for n := 0; n < killAfter; n++ {
		select {
		case <-ackedBatches:
		case err := <-writerDone:
			t.Fatalf("writer stopped before the kill: %v; child stderr: %s", err, ch.stderr.String())
		}
	}
	ch.kill()
	if err := <-writerDone; err == nil {
		t.Fatalf("writer finished all %d batches before the kill", maxBatches)
	}
	// The writer goroutine has returned: acked and attempted are safe to read.
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	t.Logf("killed after %d attempted batches, %d keys acknowledged", attempted, len(acked))

	ch2 := startChild(t, dir)
	c2, _ := connect(t, ch2.uri)
	coll2 := c2.Database("kill").Collection("events")
	cur, err := coll2.Find(ctx, bson.D{})
	if err != nil {
		t.Fatalf("find after restart: %v", err)
	}
	var docs []struct {
		ID string `bson:"id"`
		V  int32  `bson:"v"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatalf("read after restart: %v", err)
	}
	stored := map[string]int32{}
	for _, d := range docs {
		if _, dup := stored[d.ID]; dup {
			t.Errorf("key %s stored twice", d.ID)
		}
		stored[d.ID] = d.V
	}
	for k, v := range acked {
		got, ok := stored[k]
		switch {
		case !ok:
			t.Errorf("acknowledged key %s (v %d) lost", k, v)
		case got < v || got > attempted:
			t.Errorf("key %s: v = %d, want between the acknowledged %d and the last attempted %d", k, got, v, attempted)
		}
	}
	if _, err := coll2.InsertOne(ctx, key("k1", "p", 1)); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("unique index after recovery: %v", err)
	}
}
