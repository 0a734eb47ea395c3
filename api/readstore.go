package api

import (
	"context"
	"slices"
	"time"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// span is a run of ticks [from, to) that share one tree version; tree is nil when no version
// is effective there.
type span struct {
	from, to time.Time
	version  int
	tree     *tree.Tree
}

// spans splits [from, to) by the tree version effective at each tick (the one with the
// largest effective_from <= tick, the larger version on a tie, as treedb.Store.VersionAt) and
// loads each span's tree. There is at least one span.
func (rd *reader) spans(ctx context.Context, project string, from, to time.Time) ([]span, error) {
	vs, err := rd.trees.Versions(ctx, project)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(vs, func(a, b treedb.Version) int {
		if c := a.EffectiveFrom.Compare(b.EffectiveFrom); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	cur := -1 // index in vs of the version effective at start
	i := 0
	for ; i < len(vs) && !vs[i].EffectiveFrom.After(from); i++ {
		cur = i
	}
	var out []span
	start := from
	for ; i < len(vs) && vs[i].EffectiveFrom.Before(to); i++ {
		if vs[i].EffectiveFrom.After(start) {
			out = append(out, span{from: start, to: vs[i].EffectiveFrom, version: versionOf(vs, cur)})
			start = vs[i].EffectiveFrom
		}
		cur = i
	}
	out = append(out, span{from: start, to: to, version: versionOf(vs, cur)})
	for k := range out {
		if out[k].version == 0 {
			continue
		}
		if out[k].tree, err = rd.trees.Load(ctx, project, out[k].version); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func versionOf(vs []treedb.Version, i int) int {
	if i < 0 {
		return 0
	}
	return vs[i].Version
}

// counts is the counts collection.
func (rd *reader) counts() store.Counts { return store.NewCounts(rd.db) }

// nodeDocs calls fn with project's documents of node (id, typ) in [from, to), in time order.
func (rd *reader) nodeDocs(ctx context.Context, project, id, typ string, from, to time.Time, fn func(store.Node)) error {
	return rd.counts().NodeRange(ctx, project, id, typ, from, to, fn)
}

// latestRootTick returns the latest tick that has a document of the root of its tree
// version: for each version from the latest, the latest root document of the ticks it is
// effective for.
func (rd *reader) latestRootTick(ctx context.Context, project string) (time.Time, bool, error) {
	vs, err := rd.trees.Versions(ctx, project)
	if err != nil {
		return time.Time{}, false, err
	}
	slices.SortFunc(vs, func(a, b treedb.Version) int {
		if c := a.EffectiveFrom.Compare(b.EffectiveFrom); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	end := maxReadTime
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if !v.EffectiveFrom.Before(end) {
			continue // replaced by a later version effective from the same tick
		}
		t, err := rd.trees.Load(ctx, project, v.Version)
		if err != nil {
			return time.Time{}, false, err
		}
		root := t.Root()
		found, ok, err := rd.counts().LatestNode(ctx, project, root.ID, root.Type, v.EffectiveFrom, end)
		if err != nil || ok {
			return found.Tick, ok, err
		}
		end = v.EffectiveFrom
	}
	return time.Time{}, false, nil
}

// tickDocs calls fn with every document of project at tick t (leaves and parents).
func (rd *reader) tickDocs(ctx context.Context, project string, t time.Time, fn func(store.Node)) error {
	return rd.counts().TickNodes(ctx, project, t, fn)
}

// parentDoc returns project's parent document of node (id, typ) at t; ok is false when there
// is none.
func (rd *reader) parentDoc(ctx context.Context, project, id, typ string, t time.Time) (p rollup.Parent, ok bool, err error) {
	return rd.counts().Parent(ctx, project, id, typ, t)
}
