package embedded

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/storage"
)

// TestSmallWriteSkipsLargeWriteQueue: while the engine's write lock is held, eight large
// insert commands (more than largeWrite documents each) arrive one after the other, then a
// one-document insert; once the lock is free, the small insert is applied after at most one of
// the large commands, not after all eight (the order is the oplog's). Without write turns every
// queued command waits for every one queued before it, so a watcher's parents waited for every
// leaf batch of every serve instance. Arrivals are observed from the goroutine stacks: a
// command is queued once its handler is blocked in writeStatements.
func TestSmallWriteSkipsLargeWriteQueue(t *testing.T) {
	s, c := startInternal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	coll := c.Database("turns").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "first"}}); err != nil {
		t.Fatal(err)
	}
	const large = 8
	colls := connectedColls(ctx, t, s, large+1)
	start := s.engine.LastOpTime()

	free, holdDone := holdWriteLock(ctx, t, s)
	errs := make(chan error, large+1)
	for i := range large {
		docs := make([]any, largeWrite+1)
		for j := range docs {
			docs[j] = bson.D{{Key: "_id", Value: fmt.Sprintf("L%d-%d", i, j)}}
		}
		go func() {
			_, err := colls[i].InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
			errs <- err
		}()
		waitQueuedWrites(t, i+1) // one at a time: their arrival order is known
	}
	go func() {
		_, err := colls[large].InsertOne(ctx, bson.D{{Key: "_id", Value: "small"}})
		errs <- err
	}()
	waitQueuedWrites(t, large+1)
	free()
	for range large + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}

	before := map[string]bool{} // large commands with a document applied before the small one
	found := false
	for _, re := range s.engine.OplogAfterRaw(start, 0) {
		e, err := re.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if e.Coll != "c" || e.Op != storage.OpInsert {
			continue
		}
		id, _ := e.DocKey[0].Value.(string)
		if id == "small" {
			found = true
			break
		}
		before[strings.SplitN(id, "-", 2)[0]] = true
	}
	if !found {
		t.Fatal("the small insert is not in the oplog")
	}
	if len(before) > 1 {
		t.Fatalf("the small insert was applied after %d large commands queued before it (%v), want at most 1", len(before), before)
	}
}

// waitQueuedWrites waits until n write commands are blocked in writeStatements: waiting for
// the engine's write lock (which the test holds) or for their turn.
func waitQueuedWrites(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		for {
			m := runtime.Stack(buf, true)
			if m < len(buf) {
				buf = buf[:m]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		got := 0
		for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
			header, _, _ := bytes.Cut(g, []byte("\n"))
			blocked := bytes.Contains(header, []byte("[sync.Mutex.Lock")) || bytes.Contains(header, []byte("[sync.RWMutex.Lock")) ||
				bytes.Contains(header, []byte("[select")) || bytes.Contains(header, []byte("[chan send"))
			if blocked && bytes.Contains(g, []byte("embedded.(*Server).writeStatements(")) {
				got++
			}
		}
		buf = buf[:cap(buf)]
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("%d write commands queued, want %d", got, n)
		}
		pause := time.NewTimer(time.Millisecond)
		<-pause.C
	}
}

// TestLargeWriteYieldsToSmallWrite: a large insert command (8 holds of yieldEvery documents)
// and then a one-document insert queue while the engine's write lock is held; once it is
// free the large command goes first, and the small insert is applied after at most
// yieldEvery of its documents (the large command lets it in between two holds, as mongod
// yields between statements), not after all of them. Before, a command held the lock for
// all of its statements: a watcher's parents waited for the whole of a 1,000-leaf batch.
func TestLargeWriteYieldsToSmallWrite(t *testing.T) {
	s, c := startInternal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	coll := c.Database("turns").Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "first"}}); err != nil {
		t.Fatal(err)
	}
	colls := connectedColls(ctx, t, s, 2)
	start := s.engine.LastOpTime()

	free, holdDone := holdWriteLock(ctx, t, s)
	errs := make(chan error, 2)
	const largeDocs = 8 * yieldEvery
	docs := make([]any, largeDocs)
	for j := range docs {
		docs[j] = bson.D{{Key: "_id", Value: fmt.Sprintf("L-%d", j)}}
	}
	go func() {
		_, err := colls[0].InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		errs <- err
	}()
	waitQueuedWrites(t, 1) // the large command asks for the lock first
	go func() {
		_, err := colls[1].InsertOne(ctx, bson.D{{Key: "_id", Value: "small"}})
		errs <- err
	}()
	waitQueuedWrites(t, 2)
	free()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}

	before, found := 0, false // the large command's documents applied before the small one
	for _, re := range s.engine.OplogAfterRaw(start, 0) {
		e, err := re.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if e.Coll != "c" || e.Op != storage.OpInsert {
			continue
		}
		if id, _ := e.DocKey[0].Value.(string); id == "small" {
			found = true
			break
		}
		before++
	}
	if !found {
		t.Fatal("the small insert is not in the oplog")
	}
	if before > yieldEvery {
		t.Fatalf("the small insert was applied after %d of the large command's %d documents, want at most %d", before, largeDocs, yieldEvery)
	}
	t.Logf("the small insert was applied after %d of the large command's documents", before)
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != largeDocs+2 {
		t.Fatalf("count = %d, %v; want %d", n, err, largeDocs+2)
	}
}

// connectedColls returns n collections "turns.c", each through a client of its own connected
// beforehand: a new connection's handshake reads the engine, which waits while a test holds
// the write lock.
func connectedColls(ctx context.Context, t *testing.T, s *Server, n int) []*mongo.Collection {
	t.Helper()
	colls := make([]*mongo.Collection, n)
	for i := range colls {
		ci, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetHeartbeatInterval(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ci.Disconnect(context.Background()) })
		colls[i] = ci.Database("turns").Collection("c")
		if err := colls[i].Database().RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return colls
}

// holdWriteLock takes the engine's write lock and holds it until free is called (at the
// latest at the test's cleanup, so a failure never leaves it held); holdDone receives the
// hold's error once it ends.
func holdWriteLock(ctx context.Context, t *testing.T, s *Server) (free func(), holdDone <-chan error) {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	done := make(chan error, 1)
	go func() {
		_, err := s.engine.Write(ctx, func(*storage.Writer) error {
			close(held)
			<-release
			return nil
		})
		done <- err
	}()
	<-held
	return free, done
}
