package bulk

import "time"

// heavyBatchDivisor divides MaxBatch for the heavy project's batches while other projects send
// too (see Writer.take).
const heavyBatchDivisor = 4

// loadWindow is how long recentLoad counts a window; it names the heavy project from the
// last one to two windows of accepted items.
const loadWindow = time.Second

// recentLoad counts the items accepted per project over the last one to two windows, to name
// the heavy project: the one that sent more than half of them. Its items are cut into their
// own batches, written after the other projects' (see "Batching policy" in
// docs/design/ingest.md): a project that sends more than all the others together (a runaway
// agent, or the largest project at a tick) then never delays the others' items by its
// batches nor shares one with them. With one project sending, it is the heavy one and there
// is no other: batching is as without the split. At most one project is heavy.
type recentLoad struct {
	start       time.Time      // of the current window
	cur, prev   map[string]int // items per project, this window and the one before
	curN, prevN int            // the same, all projects
	leader      string         // the last project seen with more than half of them
}

// add counts n items of project accepted at now.
func (r *recentLoad) add(project string, n int, now time.Time) {
	r.roll(now)
	if r.cur == nil {
		r.cur = make(map[string]int)
	}
	r.cur[project] += n
	r.curN += n
	// Between rolls counts only grow, so a project gains a majority only by its own items.
	if r.majority(project) {
		r.leader = project
	}
}

// heavy returns the project that sent more than half of the recent items, or "" when none
// did.
func (r *recentLoad) heavy(now time.Time) (string, bool) {
	r.roll(now)
	if r.curN+r.prevN == 0 || !r.majority(r.leader) {
		return "", false
	}
	return r.leader, true
}

// others returns how many of the recent items were not heavy's (all of them when no project
// is heavy).
func (r *recentLoad) others(now time.Time) int {
	heavy, ok := r.heavy(now)
	if !ok {
		return r.curN + r.prevN
	}
	return r.curN + r.prevN - r.cur[heavy] - r.prev[heavy]
}

func (r *recentLoad) majority(project string) bool {
	return 2*(r.cur[project]+r.prev[project]) > r.curN+r.prevN
}

// roll starts a new window once the current one is over: the current becomes the previous
// (both are emptied after a quiet window), and the leader is looked for again.
func (r *recentLoad) roll(now time.Time) {
	if r.start.IsZero() {
		r.start = now
	}
	el := now.Sub(r.start)
	if el < loadWindow {
		return
	}
	r.start = r.start.Add(el.Truncate(loadWindow)) // windows stay aligned to the first
	if el >= 2*loadWindow {                        // the current window is over too
		clear(r.cur)
		r.curN = 0
	}
	r.prev, r.cur = r.cur, r.prev // the maps are kept: no allocation per window
	r.prevN, r.curN = r.curN, 0
	clear(r.cur)
	r.leader = ""
	for p := range r.prev {
		if r.majority(p) {
			r.leader = p
			break
		}
	}
}
