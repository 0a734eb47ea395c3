package api

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/retry"
)

// maxPendingUses bounds the tokens whose use waits to be written; beyond it a new token's
// use is dropped until the next flush (last-used times are advisory).
const maxPendingUses = maxCacheEntries

// flushTimeout bounds one write of the last-used times.
const flushTimeout = 5 * time.Second

// usageRecorder gathers when each token was last used and writes it at most once per
// interval (Server.Run), so that a request pays a map update, not a store write.
type usageRecorder struct {
	store tokenStore
	log   *zap.Logger

	mu      sync.Mutex
	pending map[string]time.Time // token hash → last use since the last flush
}

func newUsageRecorder(store tokenStore, log *zap.Logger) *usageRecorder {
	return &usageRecorder{store: store, log: log, pending: make(map[string]time.Time)}
}

// record notes that the token of hash was used at t.
func (u *usageRecorder) record(hash string, t time.Time) {
	u.mu.Lock()
	if prev, ok := u.pending[hash]; ok {
		if t.After(prev) {
			u.pending[hash] = t
		}
	} else if len(u.pending) < maxPendingUses {
		u.pending[hash] = t
	}
	u.mu.Unlock()
}

// flush writes the pending uses. On failure they are merged back for the next flush.
func (u *usageRecorder) flush(ctx context.Context) {
	u.mu.Lock()
	used := u.pending
	u.pending = make(map[string]time.Time, len(used))
	u.mu.Unlock()
	if len(used) == 0 {
		return
	}
	ctx, cancel := retry.Bound(ctx, flushTimeout)
	err := u.store.touchTokens(ctx, used)
	cancel()
	if err == nil {
		return
	}
	u.log.Warn("token last-used times not written; retrying at the next flush", zap.Int("tokens", len(used)), zap.Error(err))
	for h, t := range used {
		u.record(h, t)
	}
}
