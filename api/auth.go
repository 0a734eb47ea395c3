package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// HashToken returns the sha256 hex of a token: the only form in which tokens are stored
// (the _id of the tokens collection).
func HashToken(token string) string {
	h := hashToken(token)
	return string(h[:])
}

// tokenHash is HashToken's result in an array, so that a cache hit allocates nothing.
type tokenHash [2 * sha256.Size]byte

// hashToken is HashToken without allocation for tokens of at most maxTokenLen bytes (every
// token bearerToken accepts).
func hashToken(token string) tokenHash {
	var sum [sha256.Size]byte
	if len(token) <= maxTokenLen {
		var b [maxTokenLen]byte // []byte(token) would allocate beyond 32 bytes
		sum = sha256.Sum256(b[:copy(b[:], token)])
	} else {
		sum = sha256.Sum256([]byte(token))
	}
	var h tokenHash
	hex.Encode(h[:], sum[:])
	return h
}

// maxTokenLen bounds a presented token; ours are 43 characters.
const maxTokenLen = 256

// bearerToken extracts the token of an "Authorization: Bearer <token>" header (the scheme is
// case-insensitive); ok is false when it is missing or malformed.
func bearerToken(header string) (string, bool) {
	scheme, tok, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > maxTokenLen {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		if !b64tokenByte(tok[i]) {
			return "", false
		}
	}
	return tok, true
}

// b64tokenByte reports whether c may appear in an RFC 6750 b64token.
func b64tokenByte(c byte) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~+/=", c) >= 0
}

// tokenInfo is what a valid token grants.
type tokenInfo struct {
	// hash is the token's sha256 hex (set by the authCache): the key of its usage and limits.
	hash          string
	project       string
	projectExists bool
	// readOnly is set for any scope but ScopeIngest (or none): such a token may not ingest.
	readOnly bool
	// revokedAt and expiresAt end the token (zero: never).
	revokedAt, expiresAt time.Time
}

// refusal is the 401 message of a revoked or expired token at now, "" while it works.
func (i tokenInfo) refusal(now time.Time) string {
	switch {
	case !i.revokedAt.IsZero():
		return "token revoked at " + i.revokedAt.UTC().Format(time.RFC3339) + "; ask for a new token ('rollup token create')"
	case !i.expiresAt.IsZero() && !now.Before(i.expiresAt):
		return "token expired at " + i.expiresAt.UTC().Format(time.RFC3339) + "; ask for a new token ('rollup token create' or 'rotate')"
	}
	return ""
}

// tokenStore resolves a token hash (found is false for an unknown token) and records when
// tokens were last used.
type tokenStore interface {
	lookupToken(ctx context.Context, hash string) (info tokenInfo, found bool, err error)
	touchTokens(ctx context.Context, used map[string]time.Time) error
}

// errNoDB reports a Server configured without a database.
var errNoDB = errors.New("api: no database configured")

// mongoTokens is the tokenStore of the tokens and projects collections.
type mongoTokens struct{ db *mongo.Database }

func (m mongoTokens) lookupToken(ctx context.Context, hash string) (tokenInfo, bool, error) {
	if m.db == nil {
		return tokenInfo{}, false, errNoDB
	}
	var tok struct {
		Project   string    `bson:"project"`
		Scope     string    `bson:"scope"`
		ExpiresAt time.Time `bson:"expires_at"`
		RevokedAt time.Time `bson:"revoked_at"`
	}
	err := m.db.Collection(store.TokensCollection).FindOne(ctx, bson.D{{Key: "_id", Value: hash}},
		options.FindOne().SetProjection(bson.D{
			{Key: store.FieldProject, Value: 1}, {Key: store.FieldScope, Value: 1},
			{Key: store.FieldExpiresAt, Value: 1}, {Key: store.FieldRevokedAt, Value: 1},
		})).Decode(&tok)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return tokenInfo{}, false, nil
	}
	if err != nil {
		return tokenInfo{}, false, fmt.Errorf("find token: %w", err)
	}
	exists, err := store.ProjectExists(ctx, m.db, tok.Project)
	if err != nil {
		return tokenInfo{}, false, err
	}
	readOnly := tok.Scope != "" && tok.Scope != ScopeIngest
	return tokenInfo{project: tok.Project, projectExists: exists, readOnly: readOnly,
		revokedAt: tok.RevokedAt, expiresAt: tok.ExpiresAt}, true, nil
}

// touchTokens moves each token's last_used_at forward to its time in used (never back: two
// instances may flush in any order), in one unordered bulk write.
func (m mongoTokens) touchTokens(ctx context.Context, used map[string]time.Time) error {
	if m.db == nil {
		return errNoDB
	}
	models := make([]mongo.WriteModel, 0, len(used))
	for hash, t := range used {
		models = append(models, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: hash}}).
			SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: store.FieldLastUsedAt, Value: t}}}}))
	}
	if len(models) == 0 {
		return nil
	}
	if _, err := m.db.Collection(store.TokensCollection).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		return fmt.Errorf("record token use: %w", err)
	}
	return nil
}

// Cache bounds.
const (
	// MaxTokenCacheTTL bounds Config.TokenCacheTTL: a revoked token stops working on every
	// instance within it plus one store lookup, well within 5 s.
	MaxTokenCacheTTL = 4 * time.Second
	maxNegativeTTL   = 5 * time.Second
	// maxStaleOnError is how old a cached token may be and still answer while the store
	// cannot be read.
	maxStaleOnError = 30 * time.Second
	// maxStaleWhileRefresh is how long after its expiry an active token's entry still answers
	// while it is refreshed (at most TokenCacheTTL): TokenCacheTTL plus this stays within 5 s.
	maxStaleWhileRefresh = time.Second
	maxCacheEntries      = 10_000
	lookupTimeout        = 5 * time.Second
)

// authCache caches token lookups (found and not found; errors are not cached) for a short
// time and lets concurrent lookups of one token share a single query, so the tick's burst of
// agents costs one query per project token.
type authCache struct {
	store  tokenStore
	ttl    time.Duration
	negTTL time.Duration
	now    func() time.Time

	mu       sync.Mutex
	entries  map[string]cacheEntry
	inflight map[string]*lookupCall
	// lookups are the shared queries in flight; once closed (Server.Run is over) a lookup
	// runs in its caller instead and no refresh starts (see close).
	lookups conc.WaitGroup
	closed  bool
}

type cacheEntry struct {
	info    tokenInfo
	found   bool
	expires time.Time
	fetched time.Time // when the store answered it
}

type lookupCall struct {
	done    chan struct{}
	waiters int // callers that joined after the first (tests observe it)
	info    tokenInfo
	found   bool
	err     error
}

func newAuthCache(store tokenStore, ttl time.Duration, now func() time.Time) *authCache {
	return &authCache{
		store: store, ttl: ttl, negTTL: min(ttl, maxNegativeTTL), now: now,
		entries: make(map[string]cacheEntry), inflight: make(map[string]*lookupCall),
	}
}

// lookupByToken is lookup(ctx, HashToken(token)), without allocating when the cache answers.
// now is the time of the request (from the cache's clock): a cache entry answers when it
// expires after now.
func (a *authCache) lookupByToken(ctx context.Context, token string, now time.Time) (tokenInfo, bool, error) {
	h := hashToken(token)
	a.mu.Lock()
	if e, ok := a.entries[string(h[:])]; ok && now.Before(e.expires) {
		a.mu.Unlock()
		return e.info, e.found, nil
	}
	a.mu.Unlock()
	return a.lookup(ctx, string(h[:]))
}

// lookup returns what the token of the given hash grants: from the cache, else from the
// store (one query shared by concurrent lookups of the hash). A known token whose entry
// expired less than staleFor ago answers from it while the store is queried in the
// background, so that a request never waits for a refresh of an active token.
func (a *authCache) lookup(ctx context.Context, hash string) (tokenInfo, bool, error) {
	a.mu.Lock()
	now := a.now()
	e, cached := a.entries[hash]
	if cached && now.Before(e.expires) {
		a.mu.Unlock()
		return e.info, e.found, nil
	}
	if cached && e.found && now.Before(e.expires.Add(min(a.ttl, maxStaleWhileRefresh))) {
		if _, running := a.inflight[hash]; !running && !a.closed {
			call := &lookupCall{done: make(chan struct{})}
			a.inflight[hash] = call
			a.lookups.Go(func() { a.run(context.WithoutCancel(ctx), hash, call) })
		}
		a.mu.Unlock()
		return e.info, e.found, nil
	}
	call, running := a.inflight[hash]
	inline := false
	switch {
	case running:
		call.waiters++
	default:
		call = &lookupCall{done: make(chan struct{})}
		a.inflight[hash] = call
		// The shared query must not die with the request that started it; it is bounded by
		// lookupTimeout instead.
		if inline = a.closed; !inline {
			a.lookups.Go(func() { a.run(context.WithoutCancel(ctx), hash, call) })
		}
	}
	a.mu.Unlock()
	if inline {
		a.run(context.WithoutCancel(ctx), hash, call)
	}
	select {
	case <-call.done:
		return call.info, call.found, call.err
	case <-ctx.Done():
		return tokenInfo{}, false, fmt.Errorf("token lookup: %w", ctx.Err())
	}
}

// run performs one shared lookup and publishes its result. lookupTimeout bounds it without a
// context deadline, under which the driver would retry a read failing on a dropped
// connection for as long as the deadline allows (a command loop during a store fault).
func (a *authCache) run(ctx context.Context, hash string, call *lookupCall) {
	call.err = errLookupPanicked // until the store answers
	defer a.publish(hash, call)  // also when the lookup panics: its waiters get errLookupPanicked
	ctx, cancel := retry.Bound(ctx, lookupTimeout)
	defer cancel()
	call.info, call.found, call.err = a.store.lookupToken(ctx, hash)
}

// errLookupPanicked is the result of a shared lookup that panicked: its callers get it, and
// the panic is raised again where Server.Run waits for the lookups (see close).
var errLookupPanicked = errors.New("token lookup panicked")

// publish caches the result of call (or keeps a recent entry while the store cannot be read)
// and hands it to the callers waiting for it.
func (a *authCache) publish(hash string, call *lookupCall) {
	call.info.hash = hash
	a.mu.Lock()
	delete(a.inflight, hash)
	now := a.now()
	if call.err == nil {
		ttl := a.ttl
		if !call.found {
			ttl = a.negTTL
		}
		a.evictLocked()
		a.entries[hash] = cacheEntry{info: call.info, found: call.found, expires: now.Add(ttl), fetched: now}
	} else if e, ok := a.entries[hash]; ok && e.found && now.Sub(e.fetched) <= maxStaleOnError {
		// The store cannot be read: a token it confirmed recently still answers, so that a
		// store fault does not turn every agent's next request into a 503 as its entry
		// expires. A revocation is still seen within TokenCacheTTL whenever the store can be
		// read; while it cannot, nothing could be written anyway.
		call.info, call.found, call.err = e.info, true, nil
	}
	a.mu.Unlock()
	close(call.done)
}

// close waits for the shared lookups in flight (raising again the panic of one that
// panicked); from then on a lookup runs in its caller and an active token's entry is not
// refreshed in the background. Server.Run calls it on its way out.
func (a *authCache) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.lookups.Wait()
}

// evictLocked makes room for one entry: expired entries go first, then arbitrary ones.
func (a *authCache) evictLocked() {
	if len(a.entries) < maxCacheEntries {
		return
	}
	now := a.now()
	for k, e := range a.entries {
		if !now.Before(e.expires) {
			delete(a.entries, k)
		}
	}
	for k := range a.entries {
		if len(a.entries) < maxCacheEntries {
			break
		}
		delete(a.entries, k)
	}
}
