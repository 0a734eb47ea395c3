package bulk

import (
	"math/rand/v2"
	"testing"
)

// TestQueueRandom cross-checks queue against a plain slice FIFO over random pushes and takes,
// and checks that taken ops are cleared from the queue's array (it must not keep requests
// alive) and that its array stays bounded by what is pending.
func TestQueueRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var q queue
	var naive []op
	next := 0
	req := &request{}
	for step := range 20_000 {
		if rng.IntN(3) > 0 || len(naive) == 0 {
			for range 1 + rng.IntN(40) {
				o := op{idx: next, req: req}
				next++
				q.push(o)
				naive = append(naive, o)
			}
		} else {
			n := 1 + rng.IntN(len(naive))
			got := q.take(nil, n)
			for i := range got {
				if got[i].idx != naive[i].idx {
					t.Fatalf("step %d: take(%d)[%d] = op %d, want %d", step, n, i, got[i].idx, naive[i].idx)
				}
			}
			naive = naive[n:]
		}
		if q.len() != len(naive) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(naive))
		}
		if len(naive) > 0 && q.oldest().idx != naive[0].idx {
			t.Fatalf("step %d: oldest %d, want %d", step, q.oldest().idx, naive[0].idx)
		}
		for i := range q.head {
			if q.ops[i].req != nil {
				t.Fatalf("step %d: taken op at %d still refers to its request", step, i)
			}
		}
		if q.len() == 0 && cap(q.ops) > keepOps {
			t.Fatalf("step %d: empty queue keeps an array of %d ops", step, cap(q.ops))
		}
	}
}

// TestQueueBounded bounds the array: ops pushed and taken a batch at a time, with a steady
// backlog, must not make the array grow without bound (taken space is reused).
func TestQueueBounded(t *testing.T) {
	var q queue
	const backlog, batch = 2500, 1000
	for i := range backlog {
		q.push(op{idx: i})
	}
	var dst []op
	for round := range 1000 {
		for i := range batch {
			q.push(op{idx: backlog + round*batch + i})
		}
		dst = q.take(dst[:0], batch)
	}
	if c := cap(q.ops); c > 4*(backlog+batch) {
		t.Fatalf("array of %d ops for a backlog of %d", c, backlog+batch)
	}
}

func TestRecyclable(t *testing.T) {
	tests := []struct {
		name string
		res  []Result
		want bool
	}{
		{"empty", nil, true},
		{"applied and stale", []Result{{Outcome: OutcomeApplied}, {Outcome: OutcomeStale}}, true},
		{"rejected", []Result{{Outcome: OutcomeApplied}, {Outcome: OutcomeRejected, Err: ErrUnavailable}}, true},
		{"one unknown", []Result{{Outcome: OutcomeApplied}, {Outcome: OutcomeUnknown, Err: ErrUnavailable}}, false},
	}
	for _, tc := range tests {
		if got := recyclable(tc.res); got != tc.want {
			t.Errorf("%s: recyclable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
