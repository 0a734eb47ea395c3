package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer abc-DEF_123", "abc-DEF_123", true},
		{"bearer abc", "abc", true},
		{"BEARER abc==", "abc==", true},
		{"Bearer  abc ", "abc", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"Bearer a b", "", false},
		{"Bearer a\x00", "", false},
		{"Bearer é", "", false},
	}
	for _, tc := range tests {
		got, ok := bearerToken(tc.header)
		if got != tc.want || ok != tc.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestHashToken(t *testing.T) {
	// sha256("abc"), a published test vector.
	if got := HashToken("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("HashToken(abc) = %s", got)
	}
	// hashToken is sha256 hex at every length, including beyond maxTokenLen.
	for _, n := range []int{0, 1, 18, 32, 33, 43, maxTokenLen - 1, maxTokenLen, maxTokenLen + 1, 1000} {
		tok := strings.Repeat("x", n)
		sum := sha256.Sum256([]byte(tok))
		want := hex.EncodeToString(sum[:])
		if h := hashToken(tok); string(h[:]) != want || HashToken(tok) != want {
			t.Errorf("len %d: hashToken %s, HashToken %s, want %s", n, h[:], HashToken(tok), want)
		}
	}
}

// TestLookupByToken checks that lookupByToken answers as lookup of the token's hash and that a
// cache hit allocates nothing.
func TestLookupByToken(t *testing.T) {
	store := newFakeTokens()
	a := newAuthCache(store, time.Minute, testNow)
	ctx := context.Background()
	for _, tok := range []string{tokenA, tokenB, tokenDel, "nope", strings.Repeat("z", 43)} {
		info, found, err := a.lookupByToken(ctx, tok, testNow())    // a miss, then ...
		info2, found2, err2 := a.lookupByToken(ctx, tok, testNow()) // ... a hit
		want, wantFound, wantErr := a.lookup(ctx, HashToken(tok))
		if info != want || found != wantFound || !errors.Is(err, wantErr) || info2 != want || found2 != wantFound || !errors.Is(err2, wantErr) {
			t.Errorf("%s: lookupByToken %+v %v %v then %+v %v %v; lookup %+v %v %v",
				tok, info, found, err, info2, found2, err2, want, wantFound, wantErr)
		}
	}
	if lookups := store.numLookups(); lookups != 5 {
		t.Errorf("%d store lookups, want 5 (one per token)", lookups)
	}
	// Entries expire as with lookup.
	clock := &fakeClock{now: testNow()}
	store = newFakeTokens()
	a = newAuthCache(store, time.Minute, clock.Now)
	for _, step := range []struct {
		advance time.Duration
		lookups int
	}{{0, 1}, {59 * time.Second, 1}, {time.Second, 2}, {30 * time.Second, 2}} {
		clock.Advance(step.advance)
		if _, found, err := a.lookupByToken(ctx, tokenA, clock.Now()); err != nil || !found {
			t.Fatalf("found %v, err %v", found, err)
		}
		// An entry just expired answers at once and is refreshed in the background.
		testctx.WaitFor(t, fmt.Sprintf("%d store lookups at %s", step.lookups, clock.Now().Sub(testNow())),
			func() bool { return store.numLookups() == step.lookups })
	}
	long := strings.Repeat("z", 43) // the length of our tokens
	if n := testing.AllocsPerRun(100, func() { _, _, _ = a.lookupByToken(ctx, long, testNow()) }); n != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", n)
	}
}

// fakeClock is a settable clock for cache expiry.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestAuthCacheExpiry(t *testing.T) {
	store := newFakeTokens()
	clock := &fakeClock{now: testNow()}
	a := newAuthCache(store, 30*time.Second, clock.Now)
	ctx := context.Background()
	steps := []struct {
		advance     time.Duration
		hash        string
		wantFound   bool
		wantLookups int
	}{
		{0, HashToken(tokenA), true, 1},
		{10 * time.Second, HashToken(tokenA), true, 1}, // cached
		{21 * time.Second, HashToken(tokenA), true, 2}, // 31s: expired
		{0, HashToken("nope"), false, 3},               // unknown token
		{4 * time.Second, HashToken("nope"), false, 3}, // negative cached
		{2 * time.Second, HashToken("nope"), false, 4}, // negatives live at most 5s
		{0, HashToken(tokenB), true, 5},                // another token
		{29 * time.Second, HashToken(tokenA), true, 6}, // cached at 31s, now 66s: expired
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		info, found, err := a.lookup(ctx, st.hash)
		if err != nil || found != st.wantFound {
			t.Fatalf("step %d: found %v err %v", i, found, err)
		}
		if found && info.project == "" {
			t.Fatalf("step %d: no project", i)
		}
		if n := store.numLookups(); n != st.wantLookups {
			t.Fatalf("step %d: %d store lookups, want %d", i, n, st.wantLookups)
		}
	}
}

// TestAuthCacheErrorsNotCached: a store error is returned and retried on the next request.
func TestAuthCacheErrorsNotCached(t *testing.T) {
	store := newFakeTokens()
	store.err = context.DeadlineExceeded
	a := newAuthCache(store, time.Minute, testNow)
	if _, _, err := a.lookup(context.Background(), HashToken(tokenA)); err == nil {
		t.Fatal("no error")
	}
	store.mu.Lock()
	store.err = nil
	store.mu.Unlock()
	if _, found, err := a.lookup(context.Background(), HashToken(tokenA)); err != nil || !found {
		t.Fatalf("after recovery: found %v err %v", found, err)
	}
	if store.numLookups() != 2 {
		t.Fatalf("%d lookups, want 2", store.numLookups())
	}
}

// TestAuthCacheSharesInflight: concurrent requests with one token cost one store query.
func TestAuthCacheSharesInflight(t *testing.T) {
	store := newFakeTokens()
	store.block = make(chan struct{})
	a := newAuthCache(store, time.Minute, testNow)
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, found, err := a.lookup(context.Background(), HashToken(tokenA))
			if err == nil && !found {
				err = context.Canceled
			}
			errs <- err
		}()
	}
	// Release the store only once every caller waits on the single in-flight query.
	deadline := testctx.Deadline(t)
	for {
		a.mu.Lock()
		call := a.inflight[HashToken(tokenA)]
		waiting := 0
		if call != nil {
			waiting = call.waiters
		}
		a.mu.Unlock()
		if waiting == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d callers joined the in-flight lookup", waiting)
		}
		time.Sleep(time.Millisecond) // polling interval, not a wait for an event
	}
	close(store.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if store.numLookups() != 1 {
		t.Fatalf("%d store lookups, want 1", store.numLookups())
	}
}

// TestAuthCacheCallerCancel: a caller whose request ends stops waiting; the shared query
// goes on for the others.
func TestAuthCacheCallerCancel(t *testing.T) {
	store := newFakeTokens()
	store.block = make(chan struct{})
	a := newAuthCache(store, time.Minute, testNow)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := a.lookup(ctx, HashToken(tokenA))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lookup returned %v, want context.Canceled", err)
	}
	close(store.block)
	if _, found, err := a.lookup(context.Background(), HashToken(tokenA)); err != nil || !found {
		t.Fatalf("after release: found %v err %v", found, err)
	}
}

func TestAuthCacheBounded(t *testing.T) {
	store := newFakeTokens()
	a := newAuthCache(store, time.Minute, testNow)
	for i := 0; i < maxCacheEntries+50; i++ {
		if _, _, err := a.lookup(context.Background(), HashToken(string(rune(i))+"x")); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.entries) > maxCacheEntries {
		t.Fatalf("%d entries, want at most %d", len(a.entries), maxCacheEntries)
	}
}

// TestAuthCacheCloseWaits: close waits for the shared lookup in flight (its caller long gone);
// after it a lookup runs in its caller and still answers.
func TestAuthCacheCloseWaits(t *testing.T) {
	store := newFakeTokens()
	store.block = make(chan struct{})
	a := newAuthCache(store, time.Minute, testNow)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := a.lookup(ctx, HashToken(tokenA)); !errors.Is(err, context.Canceled) {
		t.Fatalf("lookup with a canceled request: %v", err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		a.close()
	}()
	testctx.WaitFor(t, "close to begin", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.closed
	})
	select {
	case <-closed:
		t.Fatal("close returned while the shared lookup was still running")
	default:
	}
	close(store.block)
	<-closed
	if _, found, err := a.lookup(context.Background(), HashToken(tokenB)); err != nil || !found {
		t.Fatalf("lookup after close: found %v err %v", found, err)
	}
	if n := store.numLookups(); n != 2 {
		t.Fatalf("%d store lookups, want 2", n)
	}
}

// panickyTokens is a tokenStore whose lookups panic.
type panickyTokens struct{ fakeTokens }

func (*panickyTokens) lookupToken(context.Context, string) (tokenInfo, bool, error) {
	panic("lookup bug")
}

// TestAuthCacheLookupPanics: a shared lookup that panics answers its callers with
// errLookupPanicked (they do not hang, and nothing is cached), and close raises the panic again.
func TestAuthCacheLookupPanics(t *testing.T) {
	a := newAuthCache(&panickyTokens{}, time.Minute, testNow)
	if _, _, err := a.lookup(context.Background(), HashToken(tokenA)); !errors.Is(err, errLookupPanicked) {
		t.Fatalf("lookup = %v, want errLookupPanicked", err)
	}
	if len(a.entries) != 0 || len(a.inflight) != 0 {
		t.Fatalf("%d entries, %d in flight after a panic", len(a.entries), len(a.inflight))
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "lookup bug") {
			t.Fatalf("recovered %v, want the lookup's panic", r)
		}
	}()
	a.close()
	t.Fatal("close returned without raising the lookup's panic")
}
