package bulk

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestRecentLoadRandom cross-checks recentLoad against a naive count of every accepted item:
// at any time the heavy project is the one with more than half of the items accepted in the
// current window and the one before it (windows of loadWindow from the first item), if any.
func TestRecentLoadRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 5))
	projects := []string{"runaway", "normal", "small", ""}
	type event struct {
		window  int
		project string
		n       int
	}
	var (
		r      recentLoad
		events []event
		recent int // events[recent:] are those of the current window and the one before
	)
	now := tick0
	var first time.Time // the windows start at the first time recentLoad saw
	windowOf := func(at time.Time) int { return int(at.Sub(first) / loadWindow) }
	for step := range 20_000 {
		// Mostly small steps, sometimes a quiet spell of several windows.
		if rng.IntN(200) == 0 {
			now = now.Add(time.Duration(rng.IntN(4)) * loadWindow)
		}
		now = now.Add(time.Duration(rng.IntN(int(loadWindow / 20))))
		if step == 0 {
			first = now
		}
		if rng.IntN(4) > 0 {
			p := projects[rng.IntN(len(projects))]
			n := 1 + rng.IntN(map[string]int{"runaway": 300, "normal": 100, "small": 10, "": 50}[p])
			r.add(p, n, now)
			events = append(events, event{windowOf(now), p, n})
		}
		by, total := map[string]int{}, 0
		w := windowOf(now)
		// now never goes back, so events are in window order: skip those before the
		// previous window for good (rescanning them made the test quadratic) and count
		// every item after them.
		for recent < len(events) && events[recent].window < w-1 {
			recent++
		}
		for _, e := range events[recent:] {
			by[e.project] += e.n
			total += e.n
		}
		want, wantOK := "", false
		for p, n := range by {
			if 2*n > total {
				want, wantOK = p, true
			}
		}
		if got, ok := r.heavy(now); got != want || ok != wantOK {
			t.Fatalf("step %d: heavy %q %v, want %q %v (recent items %v of %d)", step, got, ok, want, wantOK, by, total)
		}
	}
}

// TestRecentLoad: examples of the heavy project, and of the items of the others.
func TestRecentLoad(t *testing.T) {
	type add struct {
		at      time.Duration
		project string
		n       int
	}
	for _, tc := range []struct {
		name   string
		adds   []add
		at     time.Duration
		want   string
		wantOK bool
		others int // items not of the heavy project
	}{
		{"nothing accepted: none", nil, 0, "", false, 0},
		{"one project sending is heavy, with no others", []add{{0, "a", 10}}, 0, "a", true, 0},
		{"a runaway among others", []add{{0, "a", 100}, {10 * time.Millisecond, "b", 40}, {20 * time.Millisecond, "a", 100}}, 30 * time.Millisecond, "a", true, 40},
		{"exactly half: none", []add{{0, "a", 50}, {0, "b", 50}}, 0, "", false, 100},
		{"the previous window counts", []add{{0, "a", 100}, {1500 * time.Millisecond, "b", 60}}, 1500 * time.Millisecond, "a", true, 60},
		{"the window before it does not", []add{{0, "a", 100}, {2500 * time.Millisecond, "b", 60}}, 2500 * time.Millisecond, "b", true, 0},
		{"a quiet spell forgets everything", []add{{0, "a", 100}}, 3 * time.Second, "", false, 0},
		{"a majority regained by the project's own items", []add{{0, "a", 10}, {0, "b", 20}, {0, "a", 11}}, 0, "a", true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recentLoad
			for _, a := range tc.adds {
				r.add(a.project, a.n, tick0.Add(a.at))
			}
			if got, ok := r.heavy(tick0.Add(tc.at)); got != tc.want || ok != tc.wantOK {
				t.Fatalf("heavy %q %v, want %q %v", got, ok, tc.want, tc.wantOK)
			}
			if got := r.others(tick0.Add(tc.at)); got != tc.others {
				t.Fatalf("others %d, want %d", got, tc.others)
			}
		})
	}
}
