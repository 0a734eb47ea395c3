package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// A root is correct when its stored total equals the sum of the tick's leaves of its project
// and its completeness counts them all: online = Σ leaves, reported = expected = the number
// of leaves. The poller reads, every interval, the roots of the projects whose leaves are all
// acknowledged and whose root is not correct yet, with one find per 1,000 roots on the unique
// (id, type, timestamp) index, directly from the store (not through serve's counting proxy).

// rootPoller waits for the roots of one tick.
type rootPoller struct {
	coll     *mongo.Collection
	projects []*scaleProject
	tick     time.Time
	want     []int64
	leaves   int64
	interval time.Duration

	mu      sync.Mutex
	pending map[int]bool // projects whose leaves are all acknowledged, root not correct yet
	wake    chan struct{}

	// Written by run only; read once run has returned.
	correctAt   map[int]time.Time
	lastCorrect time.Time
}

func newRootPoller(coll *mongo.Collection, projects []*scaleProject, tick time.Time, want []int64, leaves int64, interval time.Duration) *rootPoller {
	return &rootPoller{coll: coll, projects: projects, tick: tick, want: want, leaves: leaves, interval: interval,
		pending: map[int]bool{}, wake: make(chan struct{}, 1), correctAt: map[int]time.Time{}}
}

// complete says every leaf of project pi was acknowledged (at at).
func (p *rootPoller) complete(pi int, _ time.Time) {
	p.mu.Lock()
	p.pending[pi] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run polls until every root is correct or deadline passes (the roots not correct then are
// absent from correctAt).
func (p *rootPoller) run(ctx context.Context, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for len(p.correctAt) < len(p.projects) {
		p.mu.Lock()
		ids := make([]int, 0, len(p.pending))
		for pi := range p.pending {
			ids = append(ids, pi)
		}
		p.mu.Unlock()
		if len(ids) > 0 {
			correct, err := p.read(ctx, ids)
			if err != nil {
				return err
			}
			now := time.Now()
			p.mu.Lock()
			for _, pi := range correct {
				delete(p.pending, pi)
				p.correctAt[pi] = now
				p.lastCorrect = now
			}
			p.mu.Unlock()
			if len(p.correctAt) == len(p.projects) {
				return nil
			}
		}
		var tick <-chan time.Time
		if len(ids) > 0 {
			tick = time.After(p.interval)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-p.wake:
			if tick != nil {
				<-tick // keep the interval between reads
			}
		case <-tick:
		}
	}
	return nil
}

// read returns the projects among ids whose root is correct.
func (p *rootPoller) read(ctx context.Context, ids []int) ([]int, error) {
	byName := make(map[string]int, len(ids))
	var out []int
	for start := 0; start < len(ids); start += 1000 {
		chunk := ids[start:min(start+1000, len(ids))]
		names := make(bson.A, len(chunk))
		for i, pi := range chunk {
			names[i] = p.projects[pi].tree.Root().ID
			byName[p.projects[pi].tree.Root().ID] = pi
		}
		cur, err := p.coll.Find(ctx, bson.D{
			{Key: store.FieldID, Value: bson.D{{Key: "$in", Value: names}}},
			{Key: store.FieldType, Value: tree.TypeProject},
			{Key: store.FieldTimestamp, Value: p.tick},
		}, options.Find().SetProjection(bson.D{
			{Key: "_id", Value: 0}, {Key: store.FieldID, Value: 1}, {Key: store.FieldOnline, Value: 1},
			{Key: store.FieldReported, Value: 1}, {Key: store.FieldExpected, Value: 1},
		}))
		if err != nil {
			return nil, fmt.Errorf("read roots: %w", err)
		}
		for cur.Next(ctx) {
			id, _ := cur.Current.Lookup(store.FieldID).StringValueOK()
			online, _ := cur.Current.Lookup(store.FieldOnline).AsInt64OK()
			reported, _ := cur.Current.Lookup(store.FieldReported).AsInt64OK()
			expected, _ := cur.Current.Lookup(store.FieldExpected).AsInt64OK()
			pi, ok := byName[id]
			if ok && online == p.want[pi] && reported == p.leaves && expected == p.leaves {
				out = append(out, pi)
			}
		}
		err = cur.Err()
		_ = cur.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("read roots: %w", err)
		}
	}
	return out, nil
}

// checkParents compares every parent document of tick (every interior node of every
// project's tree) with the sum and the number of its leaves, the leaves' counts being the
// ones the agents sent (observed at observed).
func checkParents(ctx context.Context, coll *mongo.Collection, projects []*scaleProject, tick, observed time.Time) (parentCheck, error) {
	var c parentCheck
	for start := 0; start < len(projects); start += 100 {
		chunk := projects[start:min(start+100, len(projects))]
		type want struct{ online, reported int64 }
		wants := map[string]want{}
		names := make(bson.A, len(chunk))
		for i, pr := range chunk {
			names[i] = pr.name
			for j, l := range pr.leaves {
				v := agentsim.Online(scaleSeed, pr.first+j, observed)
				for _, a := range pr.tree.Ancestors(l.ID) {
					w := wants[a.ID]
					w.online += v
					w.reported++
					wants[a.ID] = w
				}
			}
		}
		c.parents += len(wants)
		cur, err := coll.Find(ctx, bson.D{
			{Key: store.FieldProject, Value: bson.D{{Key: "$in", Value: names}}},
			{Key: store.FieldTimestamp, Value: tick},
			{Key: store.FieldRollup, Value: true},
		}, options.Find().SetProjection(bson.D{
			{Key: "_id", Value: 0}, {Key: store.FieldID, Value: 1}, {Key: store.FieldOnline, Value: 1}, {Key: store.FieldReported, Value: 1},
		}))
		if err != nil {
			return c, fmt.Errorf("check parents: %w", err)
		}
		seen := map[string]bool{}
		for cur.Next(ctx) {
			id, _ := cur.Current.Lookup(store.FieldID).StringValueOK()
			online, _ := cur.Current.Lookup(store.FieldOnline).AsInt64OK()
			reported, _ := cur.Current.Lookup(store.FieldReported).AsInt64OK()
			w, ok := wants[id]
			if !ok || seen[id] || online != w.online || reported != w.reported {
				c.wrong++
			}
			if ok {
				seen[id] = true
			}
		}
		err = cur.Err()
		_ = cur.Close(ctx)
		if err != nil {
			return c, fmt.Errorf("check parents: %w", err)
		}
		c.missing += len(wants) - len(seen)
	}
	return c, nil
}
