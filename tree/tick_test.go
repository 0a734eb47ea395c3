package tree

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestAlignTick(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		in   time.Time
		tick time.Duration
		want time.Time
	}{
		{"aligned", utc("2024-05-01T10:05:00Z"), 5 * time.Minute, utc("2024-05-01T10:05:00Z")},
		{"inside", utc("2024-05-01T10:09:59.999999999Z"), 5 * time.Minute, utc("2024-05-01T10:05:00Z")},
		{"just after", utc("2024-05-01T10:10:00.000000001Z"), 5 * time.Minute, utc("2024-05-01T10:10:00Z")},
		{"default tick", utc("2024-05-01T10:07:00Z"), 0, utc("2024-05-01T10:05:00Z")},
		{"negative tick", utc("2024-05-01T10:07:00Z"), -time.Second, utc("2024-05-01T10:05:00Z")},
		{"other zone", time.Date(2024, 5, 1, 11, 7, 30, 0, paris), 5 * time.Minute, utc("2024-05-01T10:05:00Z")},
		{"odd tick from epoch", time.Unix(7*60*1000+59, 0), 7 * time.Minute, time.Unix(7*60*1000, 0).UTC()},
		{"before epoch", time.Unix(-1, 0), time.Minute, time.Unix(-60, 0).UTC()},
		{"hour", utc("2024-05-01T10:59:59Z"), time.Hour, utc("2024-05-01T10:00:00Z")},
		{"far future", utc("2500-01-01T00:03:00Z"), 5 * time.Minute, utc("2500-01-01T00:00:00Z")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AlignTick(tc.in, tc.tick)
			if !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Fatalf("AlignTick(%v, %v) = %v, want %v (UTC)", tc.in, tc.tick, got, tc.want)
			}
			if !IsAligned(got, tc.tick) {
				t.Errorf("IsAligned(%v) = false", got)
			}
		})
	}
}

// TestAlignTickRandom cross-checks against the naive rule: the greatest multiple of tick (in
// Unix seconds) not after t.
func TestAlignTickRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ticks := []time.Duration{time.Second, time.Minute, 5 * time.Minute, 7 * time.Minute, time.Hour}
	for i := 0; i < 10000; i++ {
		tick := ticks[r.IntN(len(ticks))]
		sec := r.Int64N(4_000_000_000) - 1_000_000_000
		in := time.Unix(sec, r.Int64N(1e9))
		ts := int64(tick / time.Second)
		naive := sec / ts * ts
		if naive > sec {
			naive -= ts
		}
		got := AlignTick(in, tick)
		if got.Unix() != naive || got.Nanosecond() != 0 {
			t.Fatalf("AlignTick(%v, %v) = %v, want unix %d", in, tick, got, naive)
		}
		if got.After(in) || !in.Before(got.Add(tick)) {
			t.Fatalf("AlignTick(%v, %v) = %v: not the tick containing it", in, tick, got)
		}
		if IsAligned(in, tick) != (in.Nanosecond() == 0 && sec == naive) {
			t.Fatalf("IsAligned(%v, %v) wrong", in, tick)
		}
	}
}
