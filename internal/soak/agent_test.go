package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// leafKey names one stored leaf: (id, tick index).
type leafKey struct {
	id   string
	tick int
}

// leafRecord is what one project's agents did to one leaf.
type leafRecord struct {
	sent     map[int64]int64 // version → value of every item sent (acknowledged or not)
	acked    int64           // the newest acknowledged version (0: none)
	value    int64           // its value
	rejected bool            // an item was answered rejected
}

// ledger is every submission the agents sent, per project.
type ledger struct {
	mu     sync.Mutex
	leaves []map[leafKey]*leafRecord // per project
}

func newLedger(projects int) *ledger {
	l := &ledger{}
	for range projects {
		l.leaves = append(l.leaves, map[leafKey]*leafRecord{})
	}
	return l
}

func (l *ledger) record(project int, k leafKey) *leafRecord {
	r := l.leaves[project][k]
	if r == nil {
		r = &leafRecord{sent: map[int64]int64{}}
		l.leaves[project][k] = r
	}
	return r
}

// submission is one request an agent sends until it is acknowledged.
type submission struct {
	project int // whose data it is (the token's project)
	tick    int
	version int64
	id      string
	items   []agentclient.Count
	// cross: items of another project's tree, sent with this project's token: the API must
	// refuse the whole request (403) and write nothing.
	cross bool
}

// stats counts what the agents of a seed saw.
type stats struct {
	submissions, attempts, acked, refused503, otherErrors, crossRefused atomic.Int64
}

// agents is everything the agents of a seed share.
type agents struct {
	w       *world
	plan    *plan
	tokens  []string
	ticks   []time.Time
	base    time.Time    // observed_at of version 0
	version atomic.Int64 // the last version handed out
	ledger  *ledger
	st      *stats
	viol    *violations
	log     *journal
	// healed is when the round's last fault was healed (unix nanoseconds; 0 before):
	// submissions acknowledged after it record how long they waited past it.
	healed    atomic.Int64
	waitsMu   sync.Mutex
	afterHeal []time.Duration
}

// ackedAfterHeal records how long a submission acknowledged at ack, first sent at sent,
// waited after the round's faults were healed.
func (a *agents) ackedAfterHeal(sent, ack time.Time) {
	h := a.healed.Load()
	if h == 0 {
		return
	}
	from := time.Unix(0, h)
	if sent.After(from) {
		from = sent
	}
	a.waitsMu.Lock()
	a.afterHeal = append(a.afterHeal, ack.Sub(from))
	a.waitsMu.Unlock()
}

// nextVersion returns a new, unique version (an observed_at in nanoseconds).
func (a *agents) nextVersion() int64 {
	return a.base.Add(time.Duration(a.version.Add(1)) * time.Microsecond).UnixNano()
}

// runAgent plays one agent of a round until it has sent its submissions and the schedule
// (until) has ended: random leaves of its project's tree at a tick up to maxTick, sometimes a
// duplicate of its last submission, a late one (built earlier, sent now), an orphan, or an
// attempt at another project's leaves or orphans.
func (a *agents) runAgent(ctx context.Context, ap agentPlan, maxTick int, until time.Time) error {
	rng := rand.New(rand.NewPCG(ap.seed, 1))
	pp := a.plan.projects[ap.project]
	other := a.plan.projects[1-ap.project]
	var last, held *submission
	for n := 0; n < ap.min || time.Now().Before(until); n++ {
		var s *submission
		switch r := rng.IntN(20); {
		case r < 3 && last != nil:
			s = last // a duplicate
		case r < 5 && held != nil:
			s, held = held, nil // a late observation
		case r == 5:
			s = a.crossSubmission(rng, ap.project, other, maxTick)
		default:
			s = a.newSubmission(rng, ap.project, pp, other, maxTick)
			if held == nil && rng.IntN(6) == 0 {
				held = s // sent later, after newer ones
				continue
			}
		}
		if err := a.deliver(ctx, rng, s); err != nil {
			return err
		}
		if !s.cross {
			last = s
		}
		pause(time.Duration(5+rng.IntN(40)) * time.Millisecond)
	}
	if held != nil {
		return a.deliver(ctx, rng, held)
	}
	return nil
}

// newSubmission draws 1–8 leaves of the project's tree at a tick, sometimes one of its
// orphans or another project's orphan.
func (a *agents) newSubmission(rng *rand.Rand, project int, pp, other *projectPlan, maxTick int) *submission {
	k := max(0, maxTick-rng.IntN(4))
	t, err := tree.Build(pp.name, pp.treeAt(k))
	if err != nil {
		panic(err)
	}
	leaves := t.Leaves()
	s := &submission{project: project, tick: k, version: a.nextVersion()}
	s.id = fmt.Sprintf("%s-%d", pp.name, s.version)
	seen := map[string]bool{}
	for range 1 + rng.IntN(8) {
		id, typ := "", ""
		switch rng.IntN(30) {
		case 0:
			id, typ = pp.orphan[rng.IntN(len(pp.orphan))], tree.TypeProcess
		case 1:
			id, typ = other.orphan[rng.IntN(len(other.orphan))], tree.TypeProcess // no tree holds it
		default:
			l := leaves[rng.IntN(len(leaves))]
			id, typ = l.ID, l.Type
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		s.items = append(s.items, agentclient.Count{ID: id, Type: typ, Online: int64(rng.IntN(1000))})
	}
	return s
}

// crossSubmission is an attempt at leaves of the other project's tree with this project's
// token: it must be refused.
func (a *agents) crossSubmission(rng *rand.Rand, project int, other *projectPlan, maxTick int) *submission {
	s := &submission{project: project, tick: max(0, maxTick-rng.IntN(4)), version: a.nextVersion(), cross: true}
	s.id = fmt.Sprintf("cross-%d", s.version)
	for _, id := range pick(rng, other.stable, 1+rng.IntN(3)) {
		s.items = append(s.items, agentclient.Count{ID: id, Type: tree.TypeProcess, Online: 999_999})
	}
	return s
}

// deliver sends s to a serve until it is acknowledged (or, for a cross-project attempt,
// refused), waiting between attempts as the answer says (Retry-After, scaled down: the soak
// compresses time).
func (a *agents) deliver(ctx context.Context, rng *rand.Rand, s *submission) error {
	a.st.submissions.Add(1)
	pp := a.plan.projects[s.project]
	a.ledger.mu.Lock()
	if !s.cross {
		for _, it := range s.items {
			a.ledger.record(s.project, leafKey{it.ID, s.tick}).sent[s.version] = it.Online
		}
	}
	a.ledger.mu.Unlock()
	sent := time.Now()
	deadline := sent.Add(3 * time.Minute)
	for attempt := 0; ; attempt++ {
		serve := a.w.serves[rng.IntN(len(a.w.serves))]
		c := &agentclient.Client{BaseURL: serve.url(), Token: a.tokens[s.project], HTTP: a.w.http, MaxAttempts: 1}
		a.st.attempts.Add(1)
		resp, err := c.Submit(ctx, agentclient.Submission{Project: pp.name, Timestamp: a.ticks[s.tick],
			ObservedAt: time.Unix(0, s.version), SubmissionID: s.id, Counts: s.items})
		var apiErr *agentclient.APIError
		switch {
		case err == nil && s.cross:
			a.viol.add("%s's token wrote another project's leaves %v at tick %d: answered 200 %+v", pp.name, s.items, s.tick, resp.Summary)
			return nil
		case err == nil:
			a.ackedAfterHeal(sent, time.Now())
			a.acked(s, resp)
			return nil
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusForbidden && s.cross:
			a.st.crossRefused.Add(1)
			return nil
		case errors.As(err, &apiErr) && !apiErr.Retryable():
			a.viol.add("submission %s (%s, tick %d, %d items) refused: %v", s.id, pp.name, s.tick, len(s.items), err)
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if os.Getenv("ROLLUP_SOAK_JOURNAL") != "" {
			a.log.logf("%s attempt %d to serve %d: %v", s.id, attempt+1, serve.idx, err)
		}
		wait := time.Duration(20+rng.IntN(80)) * time.Millisecond
		if errors.As(err, &apiErr) {
			if apiErr.StatusCode == http.StatusServiceUnavailable {
				a.st.refused503.Add(1)
			} else {
				a.st.otherErrors.Add(1)
			}
			if apiErr.RetryAfter > 0 {
				wait = min(apiErr.RetryAfter/8, 400*time.Millisecond) + time.Duration(rng.IntN(50))*time.Millisecond
			}
		} else {
			a.st.otherErrors.Add(1)
		}
		if time.Now().After(deadline) {
			a.viol.add("submission %s (%s, tick %d) %v after %d attempts in 3 minutes; last: %v", s.id, pp.name, s.tick, errNotAcked, attempt+1, err)
			return fmt.Errorf("submission %s: %w", s.id, errNotAcked)
		}
		pause(wait)
	}
}

// acked records the per-item answer of an acknowledged submission.
func (a *agents) acked(s *submission, resp *agentclient.Response) {
	a.st.acked.Add(1)
	pp := a.plan.projects[s.project]
	if len(resp.Items) != len(s.items) {
		a.viol.add("submission %s: %d items answered for %d sent", s.id, len(resp.Items), len(s.items))
		return
	}
	a.ledger.mu.Lock()
	defer a.ledger.mu.Unlock()
	for i, it := range s.items {
		r := a.ledger.record(s.project, leafKey{it.ID, s.tick})
		switch resp.Items[i].Status {
		case apiv1.StatusApplied, apiv1.StatusStale:
			if s.version > r.acked {
				r.acked, r.value = s.version, it.Online
			}
		case apiv1.StatusRejected:
			r.rejected = true
			if !isOrphan(a.plan, it.ID) {
				a.viol.add("%s's leaf %s at tick %d rejected: %s", pp.name, it.ID, s.tick, resp.Items[i].Error)
			}
		default:
			a.viol.add("submission %s item %d: status %q", s.id, i, resp.Items[i].Status)
		}
	}
}

// isOrphan reports whether id is one of the plan's orphans (no tree holds it).
func isOrphan(p *plan, id string) bool {
	for _, pp := range p.projects {
		for _, o := range pp.orphan {
			if o == id {
				return true
			}
		}
	}
	return false
}
