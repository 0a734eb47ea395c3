package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestBenchBaselines runs the harness end to end on a small tree, one tick, with and without
// the closeConnection fault: every design is correct without it; with it, the original
// design's whole-batch retry applies the ancestors' $incs twice while the re-aggregation and
// rollup stay correct.
func TestBenchBaselines(t *testing.T) {
	const leaves = 2 * 3 * 10 // groups x servers per group x processes
	tests := []struct {
		name   string
		faults bool
		// correct per design
		correct map[string]bool
	}{
		{"no faults", false, map[string]bool{designOriginal: true, designReaggregate: true, designRollup: true}},
		{"faults", true, map[string]bool{designOriginal: false, designReaggregate: true, designRollup: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			uri, stop, err := baselinesStore(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			cfg := BaselinesConfig{Groups: 2, Servers: 6, Processes: 10, Agents: 4, Ticks: 1, Batch: 1000, OriginalBatch: 1000, Faults: tc.faults}
			res, err := benchBaselines(ctx, uri, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 3 {
				t.Fatalf("%d designs, want 3", len(res))
			}
			for _, r := range res {
				if len(r.ticks) != 1 {
					t.Fatalf("%s: %d ticks, want 1", r.design, len(r.ticks))
				}
				tk := r.ticks[0]
				want := tc.correct[r.design]
				if tk.check.correct != want {
					t.Errorf("%s: totals correct %v (%s), want %v", r.design, tk.check.correct, tk.check, want)
				}
				if tk.freshOK != want {
					t.Errorf("%s: root correct %v, want %v", r.design, tk.freshOK, want)
				}
				if tk.faulted != tc.faults {
					t.Errorf("%s: fault fired %v, want %v", r.design, tk.faulted, tc.faults)
				}
				if tk.leaves != leaves || commandCount(tk.stats) == 0 || tk.stats.BytesUp == 0 {
					t.Errorf("%s: %d leaves, stats %+v", r.design, tk.leaves, tk.stats)
				}
				if !want && tk.check.rootGot <= tk.check.rootWant {
					t.Errorf("%s: root %d, want a double count above %d", r.design, tk.check.rootGot, tk.check.rootWant)
				}
			}
			// Without faults the write counts are exact: the original writes each leaf and
			// its 3 ancestors, the other two each leaf and each of the 9 parents once.
			if !tc.faults {
				wantOps := map[string]int64{designOriginal: 4 * leaves, designReaggregate: leaves + 9, designRollup: leaves + 9}
				for _, r := range res {
					if got := r.ticks[0].writeOps; got != wantOps[r.design] {
						t.Errorf("%s: %d write ops, want %d", r.design, got, wantOps[r.design])
					}
				}
			}
			var out bytes.Buffer
			printBaselines(&out, cfg, res)
			for _, s := range []string{"original", "reaggregate", "rollup", "totals correct", "rollup commands per tick = 1/"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("report lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}
