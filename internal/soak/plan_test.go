package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gameops/rollup/tree"
)

// Shape of every seed: ticks 0..numTicks-1 (in the past, within the API's late window); the
// tree edit takes effect at editTick; round r's agents submit ticks up to roundMaxTick[r], so
// nothing is written at editTick before the edit is imported (before round editRound).
const (
	numTicks  = 6
	editTick  = 3
	editRound = 2
)

var roundMaxTick = []int{1, 2, 4, 5}

// faultKind is one kind of fault of the schedule.
type faultKind int

const (
	// Fail points (lane 0; one failCommand at a time).
	fNotWritable  faultKind = iota // failCommand alwaysOn NotWritablePrimary on every write, held
	fCloseConn                     // failCommand alwaysOn closeConnection on every command, held
	fErrorTimes                    // failCommand times:n with an error code on some commands
	fSlow                          // failCommand alwaysOn blockConnection on every command, held
	fWriteConcern                  // failCommand times:n writeConcernError on update
	fReplyLost                     // onPrimaryTransactionalWrite (reply lost after the write) times:n or held
	fGetMore                       // failGetMoreAfterCursorCheckout times:n (change stream getMore fails)
	// The black pipe (lane 1).
	pReset       // reset the connection of the next replies to a command, n times
	pDropBytes   // close the connection after n more bytes of replies
	pStall       // hold the next reply to a command for a while
	pDropRequest // swallow the next request of a command and close both connections
	pCut         // stop the proxy (the store unreachable from serve), held, then start it again
	// The store process (lane 2).
	sKill // SIGKILL, restart after a while
	sStop // SIGTERM, restart after a while
	// A serve process (lane 3).
	vKill // SIGKILL, restart after a while
	vStop // SIGTERM, restart after a while
	numKinds
)

var kindNames = [numKinds]string{
	"failCommand NotWritablePrimary", "failCommand closeConnection", "failCommand error×n", "failCommand slow",
	"failCommand writeConcernError×n", "onPrimaryTransactionalWrite", "failGetMoreAfterCursorCheckout",
	"pipe reset", "pipe drop after bytes", "pipe stall", "pipe drop request", "pipe cut",
	"store kill -9", "store SIGTERM", "serve kill -9", "serve SIGTERM",
}

func (k faultKind) String() string { return kindNames[k] }

// lane of each kind: faults of one lane never overlap.
func (k faultKind) lane() int {
	switch {
	case k <= fGetMore:
		return 0
	case k <= pCut:
		return 1
	case k <= sStop:
		return 2
	default:
		return 3
	}
}

// event is one fault of a round's schedule.
type event struct {
	kind    faultKind
	at, dur time.Duration // from the round's start; dur: how long it is held (or until the restart)
	n       int           // times, bytes
	code    int32         // error code
	cmd     string        // command name ("" any)
	cmds    []string      // failCommands
	serve   int           // which serve
	long    bool
}

func (e event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v at %v", e.kind, e.at.Round(time.Millisecond))
	if e.dur > 0 {
		fmt.Fprintf(&b, " for %v", e.dur.Round(time.Millisecond))
	}
	if e.n > 0 {
		fmt.Fprintf(&b, " n=%d", e.n)
	}
	if e.code != 0 {
		fmt.Fprintf(&b, " code=%d", e.code)
	}
	if e.cmd != "" {
		fmt.Fprintf(&b, " cmd=%s", e.cmd)
	}
	if len(e.cmds) > 0 {
		fmt.Fprintf(&b, " cmds=%v", e.cmds)
	}
	if e.kind.lane() == 3 {
		fmt.Fprintf(&b, " serve=%d", e.serve)
	}
	if e.long {
		b.WriteString(" (long)")
	}
	return b.String()
}

// agentPlan is one agent of a round.
type agentPlan struct {
	project int
	seed    uint64
	min     int // submissions at least (it goes on until the schedule ends)
}

// roundPlan is one round: agents submit ticks up to maxTick while the events play.
type roundPlan struct {
	maxTick  int
	length   time.Duration // the schedule's length
	events   []event
	agents   []agentPlan
	replay   bool
	replayAt time.Duration
	replayP  int
}

// projectPlan is one project: its name and tree versions (v2 from editTick when edited).
type projectPlan struct {
	name   string
	v1, v2 []tree.Node // v2 nil when the project's tree is not edited
	// stable are leaf ids of every version (another project's agents may try them).
	stable []string
	orphan []string // ids no tree holds
}

// treeAt returns the nodes of the tree version that applies to tick k.
func (p *projectPlan) treeAt(k int) []tree.Node {
	if p.v2 != nil && k >= editTick {
		return p.v2
	}
	return p.v1
}

// plan is everything a seed decides up front.
type plan struct {
	seed     uint64
	serves   int
	projects []*projectPlan
	rounds   []roundPlan
}

// allKinds lists the kinds a seed may use; with one serve its lane 3 kinds restart it.
var allKinds = []faultKind{fNotWritable, fCloseConn, fErrorTimes, fSlow, fWriteConcern, fReplyLost, fGetMore,
	pReset, pDropBytes, pStall, pDropRequest, pCut, sKill, sStop, vKill, vStop}

// longKinds may be held for a long time (every 25th seed holds one for 8–20 s).
var longKinds = []faultKind{fNotWritable, fCloseConn, pCut, sKill, sStop, vKill}

// commands serve sends (for failCommand and the black pipe).
var (
	writeCmds = []string{"insert", "update", "delete", "findAndModify"}
	allCmds   = []string{"insert", "update", "delete", "findAndModify", "find", "aggregate", "getMore", "killCursors", "ping", "count", "listIndexes"}
	errCodes  = []int32{10107, 11602, 189, 91, 6, 9001, 11600, 13435}
)

// newPlan draws seed's plan.
func newPlan(seed uint64) *plan {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	p := &plan{seed: seed, serves: 1}
	if rng.IntN(4) == 0 {
		p.serves = 2
	}
	edited := rng.IntN(2)
	for i, name := range []string{"pa", "pb"} {
		pp := &projectPlan{name: name}
		pp.v1 = tree.Prefixed(name, tree.Generate(name, 2+rng.IntN(2), 1+rng.IntN(3), 2+rng.IntN(3)))
		if i == edited {
			pp.v2 = edit(name, pp.v1)
		}
		pp.stable = stableLeaves(pp)
		for k := range 3 {
			pp.orphan = append(pp.orphan, fmt.Sprintf("%s-orphan-%d", name, k))
		}
		p.projects = append(p.projects, pp)
	}
	longRound := -1
	if seed%25 == 1 {
		longRound = rng.IntN(len(roundMaxTick))
	}
	for r, maxTick := range roundMaxTick {
		rp := roundPlan{maxTick: maxTick, length: time.Duration(500+rng.IntN(1000)) * time.Millisecond}
		if r == longRound {
			k := longKinds[rng.IntN(len(longKinds))]
			e := drawEvent(rng, k, p.serves)
			e.at, e.dur, e.long = 200*time.Millisecond, time.Duration(8+rng.IntN(13))*time.Second, true
			rp.events = append(rp.events, e)
			rp.length = max(rp.length, e.at+e.dur+500*time.Millisecond)
		}
		// Each lane gets 0–2 events, one after the other.
		for lane := range 4 {
			cursor := time.Duration(0)
			for range rng.IntN(3) {
				var kinds []faultKind
				for _, k := range allKinds {
					if k.lane() == lane {
						kinds = append(kinds, k)
					}
				}
				e := drawEvent(rng, kinds[rng.IntN(len(kinds))], p.serves)
				e.at = cursor + time.Duration(rng.IntN(int(rp.length/time.Millisecond)/2+1))*time.Millisecond
				if busy(rp.events, lane, e.at, e.dur) {
					continue
				}
				rp.events = append(rp.events, e)
				cursor = e.at + e.dur + 50*time.Millisecond
			}
		}
		slices.SortFunc(rp.events, func(a, b event) int { return int(a.at - b.at) })
		for proj := range p.projects {
			for range 2 {
				rp.agents = append(rp.agents, agentPlan{project: proj, seed: rng.Uint64(), min: 2 + rng.IntN(4)})
			}
		}
		if rng.IntN(3) == 0 {
			rp.replay, rp.replayAt, rp.replayP = true, time.Duration(rng.IntN(int(rp.length/time.Millisecond)+1))*time.Millisecond, rng.IntN(2)
		}
		p.rounds = append(p.rounds, rp)
	}
	return p
}

// busy reports whether an event of lane overlaps [at, at+dur).
func busy(events []event, lane int, at, dur time.Duration) bool {
	for _, e := range events {
		if e.kind.lane() == lane && at < e.at+e.dur+50*time.Millisecond && e.at < at+dur+50*time.Millisecond {
			return true
		}
	}
	return false
}

// drawEvent draws the parameters of a fault of kind k (short: up to about 1.5 s).
func drawEvent(rng *rand.Rand, k faultKind, serves int) event {
	e := event{kind: k}
	short := func() time.Duration { return time.Duration(100+rng.IntN(1400)) * time.Millisecond }
	switch k {
	case fNotWritable, fCloseConn, fSlow:
		e.dur = short()
		if k == fSlow {
			e.n = 20 + rng.IntN(400) // blockTimeMS
		}
	case fErrorTimes:
		e.n, e.code = 1+rng.IntN(4), errCodes[rng.IntN(len(errCodes))]
		e.cmds = pick(rng, allCmds, 1+rng.IntN(3))
	case fWriteConcern:
		e.n = 1 + rng.IntN(3)
	case fReplyLost:
		if rng.IntN(3) == 0 {
			e.dur = short() // alwaysOn, held
		} else {
			e.n = 1 + rng.IntN(3)
		}
	case fGetMore:
		e.n, e.code = 1+rng.IntN(3), []int32{43, 91, 11601, 1}[rng.IntN(4)]
	case pReset, pStall, pDropRequest:
		e.cmd = []string{"update", "insert", "getMore", "find", "aggregate", "hello", ""}[rng.IntN(7)]
		e.n = 1 + rng.IntN(3)
		if k == pStall {
			e.dur = time.Duration(50+rng.IntN(2500)) * time.Millisecond
			e.n = 1
		}
	case pDropBytes:
		e.n = rng.IntN(20_000)
	case pCut, sKill, sStop:
		e.dur = short()
	case vKill, vStop:
		e.dur = time.Duration(rng.IntN(800)) * time.Millisecond
		e.serve = rng.IntN(serves)
	}
	return e
}

// pick returns n distinct elements of from.
func pick(rng *rand.Rand, from []string, n int) []string {
	idx := rng.Perm(len(from))[:min(n, len(from))]
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = from[j]
	}
	return out
}

// edit returns the next version of a tree: the first group's first server moves to the
// second group (when the first group has another), the last process of the first group's last server goes (when it has a
// sibling), and a process is added under the last group's first server.
func edit(project string, v1 []tree.Node) []tree.Node {
	t, err := tree.Build(project, v1)
	if err != nil {
		panic(err)
	}
	ids := func(id string) []string {
		var out []string
		for _, n := range t.Children(id) {
			out = append(out, n.ID)
		}
		return out
	}
	groups := ids(project)
	servers0 := ids(groups[0])
	firstServer, lastServer := "", servers0[len(servers0)-1]
	if len(servers0) > 1 { // a group keeps at least one server: it stays an interior node
		firstServer = servers0[0]
	}
	procs := ids(lastServer)
	drop := ""
	if len(procs) > 1 {
		drop = procs[len(procs)-1]
	}
	lastGroupServer := ids(groups[len(groups)-1])[0]
	var out []tree.Node
	for _, n := range v1 {
		if n.ID == drop {
			continue
		}
		if n.ID == firstServer {
			n.Parent = groups[1]
		}
		out = append(out, n)
	}
	return append(out, tree.Node{ID: lastGroupServer + "-new", Type: tree.TypeProcess, Parent: lastGroupServer})
}

// stableLeaves returns the leaf ids of every version of p.
func stableLeaves(p *projectPlan) []string {
	leaves := func(nodes []tree.Node) map[string]bool {
		t, err := tree.Build(p.name, nodes)
		if err != nil {
			panic(err)
		}
		m := map[string]bool{}
		for _, l := range t.Leaves() {
			m[l.ID] = true
		}
		return m
	}
	in := leaves(p.v1)
	if p.v2 != nil {
		in2 := leaves(p.v2)
		for id := range in {
			if !in2[id] {
				delete(in, id)
			}
		}
	}
	out := make([]string, 0, len(in))
	for id := range in {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// summary describes the plan in a few lines.
func (p *plan) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d serve, trees", p.seed, p.serves)
	for _, pp := range p.projects {
		fmt.Fprintf(&b, " %s(%d nodes", pp.name, len(pp.v1))
		if pp.v2 != nil {
			fmt.Fprintf(&b, ", edited at tick %d", editTick)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	for r, rp := range p.rounds {
		fmt.Fprintf(&b, "  round %d (ticks ≤ %d, %v, %d agents", r, rp.maxTick, rp.length.Round(time.Millisecond), len(rp.agents))
		if rp.replay {
			fmt.Fprintf(&b, ", replay of %s at %v", p.projects[rp.replayP].name, rp.replayAt.Round(time.Millisecond))
		}
		b.WriteString("):")
		for _, e := range rp.events {
			fmt.Fprintf(&b, " [%v]", e)
		}
		b.WriteString("\n")
	}
	return b.String()
}
