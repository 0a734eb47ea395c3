//go:build !unix

package storage

// dirLock is a no-op where flock is unavailable.
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) release() {}
