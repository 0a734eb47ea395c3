package storage

import "github.com/gameops/rollup/embedded/mongoerr"

type dirLock struct{}

func (l *dirLock) release() {}

func (e *Engine) recover() error {
	return mongoerr.NotImplementedf("durable storage yet")
}

func (e *Engine) maybeCompact() {}
