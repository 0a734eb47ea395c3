package retry

import "time"

// LogEvery is how far apart the warnings of a long outage are: the first failure is logged,
// then one line per LogEvery while it lasts.
const LogEvery = 30 * time.Second

// Throttle spaces repeated log lines: Allow is true at its first call and then at most once
// per Every (LogEvery when zero). The zero value is ready; it is not safe for concurrent use
// (each loop owns its own).
type Throttle struct {
	// Every spaces the allowed calls (0: LogEvery).
	Every time.Duration
	last  time.Time
}

// Allow reports whether a line may be logged at now, and if so counts it as logged.
func (t *Throttle) Allow(now time.Time) bool {
	every := t.Every
	if every <= 0 {
		every = LogEvery
	}
	if !t.last.IsZero() && now.Sub(t.last) < every {
		return false
	}
	t.last = now
	return true
}
