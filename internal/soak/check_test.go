package soak

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// storedDoc is a counts document as the soak reads it: its own decoding of the stored
// schema, so that its checks share nothing with rollup's decoders.
type storedDoc struct {
	ID          string    `bson:"id"`
	Type        string    `bson:"type"`
	Timestamp   time.Time `bson:"timestamp"`
	Project     string    `bson:"project"`
	Online      int64     `bson:"online"`
	Version     int64     `bson:"version"`
	Rollup      bool      `bson:"rollup"`
	Reported    int64     `bson:"reported"`
	Expected    int64     `bson:"expected"`
	TreeVersion int64     `bson:"tree_version"`
}

// checker holds what the invariants are checked against.
type checker struct {
	db     *mongo.Database
	plan   *plan
	ticks  []time.Time
	ledger *ledger
	// versionAt is the tree version that applies to a project at a tick (the store's).
	versionAt func(ctx context.Context, project string, tick time.Time) (int, error)
}

func newChecker(db *mongo.Database, p *plan, ticks []time.Time, l *ledger) *checker {
	trees := treedb.New(db)
	return &checker{db: db, plan: p, ticks: ticks, ledger: l,
		versionAt: func(ctx context.Context, project string, tick time.Time) (int, error) {
			v, _, ok, err := trees.VersionAt(ctx, project, tick)
			if err == nil && !ok {
				err = fmt.Errorf("no tree of %s at %s", project, tick.Format(time.RFC3339))
			}
			return v, err
		}}
}

// readAll reads every counts document.
func (c *checker) readAll(ctx context.Context) ([]storedDoc, error) {
	cur, err := c.db.Collection("counts").Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var docs []storedDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	return docs, nil
}

// tickOf maps a stored timestamp to its tick index (-1: not one of the seed's ticks).
func (c *checker) tickOf(ts time.Time) int {
	for k, t := range c.ticks {
		if t.Equal(ts) {
			return k
		}
	}
	return -1
}

// wantParent is the naive total of one interior node at one tick.
type wantParent struct {
	online, reported, expected int64
}

// parentMismatches compares every interior node of each project's tree at every tick with
// the naive sum of its stored, reported leaves; it returns the differences (none once the
// watcher has caught up).
func (c *checker) parentMismatches(ctx context.Context, docs []storedDoc) ([]string, error) {
	type key struct {
		project string
		id      string
		tick    int
	}
	leaves := map[key]storedDoc{}
	parents := map[key]storedDoc{}
	for _, d := range docs {
		k := key{d.Project, d.ID, c.tickOf(d.Timestamp)}
		if d.Rollup {
			parents[k] = d
		} else {
			leaves[k] = d
		}
	}
	var out []string
	for _, pp := range c.plan.projects {
		for k := range numTicks {
			nodes := pp.treeAt(k)
			t, err := tree.Build(pp.name, nodes)
			if err != nil {
				return nil, err
			}
			version, err := c.versionAt(ctx, pp.name, c.ticks[k])
			if err != nil {
				return nil, err
			}
			want := map[string]*wantParent{}
			for _, n := range nodes {
				if !t.IsLeaf(n.ID) {
					want[n.ID] = &wantParent{expected: int64(t.LeafCount(n.ID))}
				}
			}
			for _, l := range t.Leaves() {
				d, ok := leaves[key{pp.name, l.ID, k}]
				if !ok {
					continue
				}
				for _, a := range t.Ancestors(l.ID) {
					want[a.ID].online += d.Online
					want[a.ID].reported++
				}
			}
			ids := make([]string, 0, len(want))
			for id := range want {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				wp := want[id]
				got, ok := parents[key{pp.name, id, k}]
				switch {
				case wp.reported == 0 && (!ok || (got.Online == 0 && got.Reported == 0)):
				case !ok:
					out = append(out, fmt.Sprintf("%s tick %d node %s: no parent document, want online %d (%d of %d leaves)", pp.name, k, id, wp.online, wp.reported, wp.expected))
				case got.Online != wp.online || got.Reported != wp.reported || got.Expected != wp.expected || got.TreeVersion != int64(version):
					out = append(out, fmt.Sprintf("%s tick %d node %s: stored online %d, %d of %d leaves, tree %d; want online %d, %d of %d, tree %d",
						pp.name, k, id, got.Online, got.Reported, got.Expected, got.TreeVersion, wp.online, wp.reported, wp.expected, version))
				}
			}
		}
	}
	return out, nil
}

// leafViolations checks the leaves against the agents' ledger: every key stored once; every
// stored leaf is a value its own project's agents sent; every acknowledged value is stored
// with its version or a newer one the project sent; no leaf of a project's tree belongs to
// another project; an item answered rejected was one another project holds.
func (c *checker) leafViolations(docs []storedDoc) []string {
	var out []string
	type key struct {
		id, typ string
		ts      int64
	}
	seen := map[key]int{}
	projectIdx := map[string]int{}
	for i, pp := range c.plan.projects {
		projectIdx[pp.name] = i
	}
	stored := map[leafKey]storedDoc{}
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	for _, d := range docs {
		k := key{d.ID, d.Type, d.Timestamp.UnixMilli()}
		if seen[k]++; seen[k] == 2 {
			out = append(out, fmt.Sprintf("two documents for key %s/%s at %s", d.ID, d.Type, d.Timestamp.Format(time.RFC3339)))
		}
		if d.Rollup {
			continue
		}
		tick := c.tickOf(d.Timestamp)
		p, ok := projectIdx[d.Project]
		if tick < 0 || !ok {
			out = append(out, fmt.Sprintf("leaf %s at %s of project %q: not a tick or project of the seed", d.ID, d.Timestamp.Format(time.RFC3339), d.Project))
			continue
		}
		lk := leafKey{d.ID, tick}
		stored[lk] = d
		for q, pp := range c.plan.projects {
			if q != p && inTree(pp.treeAt(tick), d.ID) {
				out = append(out, fmt.Sprintf("leaf %s of %s's tree at tick %d is stored as project %s's (online %d)", d.ID, pp.name, tick, d.Project, d.Online))
			}
		}
		r := c.ledger.leaves[p][lk]
		if r == nil {
			out = append(out, fmt.Sprintf("leaf %s at tick %d of %s: stored online %d version %d, which %s never sent", d.ID, tick, d.Project, d.Online, d.Version, d.Project))
			continue
		}
		if v, ok := r.sent[d.Version]; !ok || v != d.Online {
			out = append(out, fmt.Sprintf("leaf %s at tick %d of %s: stored online %d version %d, not a value %s sent", d.ID, tick, d.Project, d.Online, d.Version, d.Project))
		}
	}
	for p, recs := range c.ledger.leaves {
		name := c.plan.projects[p].name
		for lk, r := range recs {
			d, ok := stored[lk]
			switch {
			case r.acked != 0 && !ok:
				out = append(out, fmt.Sprintf("%s's leaf %s at tick %d: acknowledged (version %d, online %d) but not stored", name, lk.id, lk.tick, r.acked, r.value))
			case r.acked != 0 && d.Project != name:
				out = append(out, fmt.Sprintf("%s's leaf %s at tick %d: acknowledged (version %d) but stored as %s's", name, lk.id, lk.tick, r.acked, d.Project))
			case r.acked != 0 && d.Version < r.acked:
				out = append(out, fmt.Sprintf("%s's leaf %s at tick %d: stored version %d (online %d) older than the acknowledged %d (online %d)",
					name, lk.id, lk.tick, d.Version, d.Online, r.acked, r.value))
			case r.acked != 0 && d.Version == r.acked && d.Online != r.value:
				out = append(out, fmt.Sprintf("%s's leaf %s at tick %d: stored online %d, acknowledged %d (version %d)", name, lk.id, lk.tick, d.Online, r.value, r.acked))
			}
			if r.rejected && (!ok || d.Project == name) {
				out = append(out, fmt.Sprintf("%s's item %s at tick %d was rejected but no other project holds the key", name, lk.id, lk.tick))
			}
		}
	}
	sort.Strings(out)
	return out
}

func inTree(nodes []tree.Node, id string) bool {
	for _, n := range nodes {
		if n.ID == id {
			return true
		}
	}
	return false
}
