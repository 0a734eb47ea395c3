package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// TestRunaway runs the runaway benchmark briefly: the normal agent is served in every phase;
// under the limits the runaway is answered 429 past its burst (and admitted at most its burst
// plus its rate), without them never.
func TestRunaway(t *testing.T) {
	// A burst of 10 requests (5 s of 2/s): above the normal agent's 5 in the phase, below the
	// runaway's.
	cfg := RunawayConfig{Duration: time.Second, NormalRate: 5, NormalLeaves: 10,
		RunawayRate: 400, RunawayLeaves: 5, TokenRPS: 2, TokenLeavesPerS: 10_000, TokenBurst: 5 * time.Second, Warmup: 200 * time.Millisecond}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := Runaway(testctx.Context(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 3 || res.Phases[0].Name != "alone" {
		t.Fatalf("%d phases, the first %q: want 3, the warm-up not reported", len(res.Phases), res.Phases[0].Name)
	}
	if len(res.Warm.Normal) == 0 || len(res.Warm.Runaway) != 0 {
		t.Errorf("warm-up: %d normal answers, runaway %v; want the normal agent alone", len(res.Warm.Normal), res.Warm.Runaway)
	}
	for _, ph := range res.Phases {
		if len(ph.Normal) == 0 || ph.NormalFailed > 0 {
			t.Errorf("%s: the normal agent got %d answers, %d failed", ph.Name, len(ph.Normal), ph.NormalFailed)
		}
	}
	limited, unlimited := res.Phases[1].Runaway, res.Phases[2].Runaway
	if limited[429] == 0 || limited[200] == 0 || limited[200] > 10+4 {
		t.Errorf("limited runaway answers %v: want 429s, and at most the burst (10) plus 2 s of 2/s admitted", limited)
	}
	if unlimited[429] != 0 || unlimited[200] == 0 {
		t.Errorf("unlimited runaway answers %v", unlimited)
	}
	var out bytes.Buffer
	res.Print(&out)
	if !strings.Contains(out.String(), "runaway, limits on") || !strings.Contains(out.String(), "p99 x") || !strings.Contains(out.String(), "--token-burst 5s") || !strings.Contains(out.String(), "--warmup 200ms") {
		t.Errorf("printed:\n%s", out.String())
	}
	if err := (RunawayConfig{Duration: time.Second, NormalRate: 1, NormalLeaves: 1, RunawayRate: 1, RunawayLeaves: 1, TokenRPS: -1}).Validate(); err == nil {
		t.Error("a negative limit validated")
	}
	if err := (RunawayConfig{Duration: time.Second, NormalRate: 1, NormalLeaves: 1, RunawayRate: 1, RunawayLeaves: 1, TokenBurst: -time.Second}).Validate(); err == nil {
		t.Error("a negative burst validated")
	}
	if err := (RunawayConfig{Duration: time.Second, NormalRate: 1, NormalLeaves: 1, RunawayRate: 1, RunawayLeaves: 1, Warmup: -time.Second}).Validate(); err == nil {
		t.Error("a negative warm-up validated")
	}
}
