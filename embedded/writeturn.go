package embedded

import (
	"context"
	"sync"
)

// largeWrite is the most statements a write command may have and still count as small; a
// command with more (a leaf writer's bulk batch: 1,000 upserts) is large.
const largeWrite = 128

// writeTurns orders the write commands at the engine's exclusive lock so that a small write
// (a watcher's chunk of at most 100 parents, a lease renewal, a checkpoint) waits for at most
// about one hold (yieldEvery statements) of a large command, however many clients keep large
// ones in flight.
//
// The lock alone hands over in about arrival order, and a goroutine spinning for it may take
// it ahead of one asleep: n clients that each keep two 1,000-statement batches in flight then
// made every small write wait for up to 2n batches, so the time a parent took to be written
// grew with the number of rollup serve instances sharing the store while the leaves written
// per second did not (docs/design/watcher.md, "Several instances"). So large commands take a
// turn, one at a time in arrival order, and the next one goes for the lock only once every
// small write that asked for it before the previous one's statements had run has it (or gave
// up). A large command also lets in, between every yieldEvery of its statements, the small
// writes that asked meanwhile, so a small write waits for at most about yieldEvery statements
// of one large command, not all of it. The lock is idle only while a small write wakes up; the
// turn passes (in the command's last hold) before the wait for durability, so the large
// commands' records still share fsyncs. MongoDB's own engine lets writes to different
// documents run side by side and yields between a command's statements; this keeps the small
// writes' wait bounded the same way.
type writeTurns struct {
	turn chan struct{} // holds a token while a large command has the turn

	mu sync.Mutex
	// asked and got count the small writes that asked for the lock and those that have it
	// (or gave up); the large command whose turn comes waits until got reaches due.
	asked, got, due uint64
	moved           chan struct{} // closed (and replaced) when got moves
}

func newWriteTurns() *writeTurns {
	return &writeTurns{turn: make(chan struct{}, 1), moved: make(chan struct{})}
}

// take waits until a write command of n statements may go for the engine's lock and returns
// the function to call once it has the lock (first thing under it) and again once its write
// returned; calls after the first do nothing. A ctx that ends first returns its error.
func (t *writeTurns) take(ctx context.Context, n int) (done func(), err error) {
	if n <= largeWrite {
		t.mu.Lock()
		t.asked++
		t.mu.Unlock()
		var once sync.Once
		return func() {
			once.Do(func() {
				t.mu.Lock()
				t.got++
				close(t.moved)
				t.moved = make(chan struct{})
				t.mu.Unlock()
			})
		}, nil
	}
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	due := t.due // set by the previous turn's holder, before it passed the turn
	t.mu.Unlock()
	if err := t.waitGot(ctx, due); err != nil {
		<-t.turn
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			t.due = t.asked
			t.mu.Unlock()
			<-t.turn
		})
	}, nil
}

// yieldEvery is the most statements a large command runs in one hold of the engine's lock:
// between two holds it lets in every small write that asked for the lock meanwhile
// (writeStatements, storage.Writer.Yield), so a small write waits for at most this many
// statements of a large command instead of all of them (a 1,000-leaf batch: 1/8).
const yieldEvery = largeWrite

// letSmallIn waits, without the engine's lock, until every small write that asked for the
// lock before now has it (or gave up): a large command that holds the turn calls it between
// two holds of the lock. It does not wait for ctx: the small writes it waits for go straight
// for the lock, which nobody holds long.
func (t *writeTurns) letSmallIn() {
	t.mu.Lock()
	due := t.asked
	t.mu.Unlock()
	_ = t.waitGot(context.Background(), due) // never fails without a deadline
}

// waitGot waits until due small writes have the lock (or gave up), or ctx ends.
func (t *writeTurns) waitGot(ctx context.Context, due uint64) error {
	for {
		t.mu.Lock()
		ready, moved := t.got >= due, t.moved
		t.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
