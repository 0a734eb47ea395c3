package tree

import "time"

// DefaultTick is the reporting interval: every count's timestamp is a multiple of it.
const DefaultTick = 5 * time.Minute

// AlignTick returns the start of the tick t falls in: t in UTC rounded down to a multiple of
// tick since the Unix epoch (so agents in any language align with unix_seconds - unix_seconds %
// tick_seconds). The monotonic clock reading is dropped. A tick <= 0 means DefaultTick.
// Years outside 1700–2200 are truncated from the zero time instead (still a tick start for
// every tick that divides a day).
func AlignTick(t time.Time, tick time.Duration) time.Time {
	if tick <= 0 {
		tick = DefaultTick
	}
	if y := t.Year(); y < 1700 || y > 2200 {
		// Outside int64 Unix nanoseconds' comfortable range: zero-time based truncation.
		return t.UTC().Truncate(tick)
	}
	ns := t.UnixNano()
	r := ns % int64(tick)
	if r < 0 {
		r += int64(tick)
	}
	return time.Unix(0, ns-r).UTC()
}

// IsAligned reports whether t is exactly the start of a tick (see AlignTick).
func IsAligned(t time.Time, tick time.Duration) bool {
	return AlignTick(t, tick).Equal(t)
}
