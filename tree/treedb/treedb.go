package treedb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// Collection names.
const (
	// TreesCollection holds one document per committed version:
	// {_id: "<project>/<version>", project, version, effective_from, nodes, leaves, created_at}.
	TreesCollection = "trees"
	// NodesCollection holds one document per node of a version:
	// {_id: "<project>/<version>/<id>", project, version, id, type, parent, seq}, plus one claim
	// document per version, {_id: "<project>/<version>/", claimed_at}, that reserves the
	// version number while it is imported (ids are never empty, so it never clashes with a node).
	NodesCollection = "tree_nodes"
)

// Field names of the trees and tree_nodes documents.
const (
	FieldProject       = "project"
	FieldVersion       = "version"
	FieldEffectiveFrom = "effective_from"
	FieldNodes         = "nodes"
	FieldLeaves        = "leaves"
	FieldCreatedAt     = "created_at"
	FieldID            = "id"
	FieldType          = "type"
	FieldParent        = "parent"
	FieldSeq           = "seq"
	FieldClaimedAt     = "claimed_at"
)

// ErrNotFound matches (errors.Is) the error of Load for a version that is not committed.
var ErrNotFound = errors.New("tree version not found")

// cacheNodes bounds the nodes of the loaded trees a Store keeps (versions are immutable): a
// compact tree.Tree costs about 70 bytes per node, so about 280 MiB. The oldest trees are
// dropped first past the budget (one tree larger than the budget stays alone).
const cacheNodes = 4_000_000

// maxClaims bounds the version numbers Import tries (each taken number belongs to a concurrent
// or crashed import).
const maxClaims = 100

// Version describes one committed version of a project's tree.
type Version struct {
	// Project is the project the tree belongs to.
	Project string
	// Version numbers the project's trees from 1.
	Version int
	// EffectiveFrom is the first tick the version applies to.
	EffectiveFrom time.Time
	// Nodes and Leaves count the tree's nodes and leaves.
	Nodes, Leaves int
	// CreatedAt is when the import committed.
	CreatedAt time.Time
}

// NodesIDIndex is the index on tree_nodes {id: 1, project: 1, version: 1}: an import asks
// which other projects' trees use any of its ids (checkForeignIDs), one indexed query per
// 1,000 ids, whatever the number of projects.
const NodesIDIndex = "id_1_project_1_version_1"

// Indexes returns the indexes the Store's queries use: trees by (project, effective_from,
// version) for VersionAt and Versions, tree_nodes by (project, version) for Load and by
// (id, project, version) for the check of an import's ids against other projects (named
// NodesIDIndex). Without them the queries scan the collections, which is fine for tests and
// small deployments.
func Indexes() []store.Index {
	keys := func(names ...string) bson.D {
		d := make(bson.D, len(names))
		for i, n := range names {
			dir := int32(1)
			if n[0] == '-' {
				n, dir = n[1:], -1
			}
			d[i] = bson.E{Key: n, Value: dir}
		}
		return d
	}
	out := []store.Index{
		{Collection: TreesCollection, Keys: keys(FieldProject, "-"+FieldEffectiveFrom, "-"+FieldVersion),
			Purpose: "tree versions are read by project"},
		{Collection: NodesCollection, Keys: keys(FieldProject, FieldVersion),
			Purpose: "tree versions are read by project"},
		{Collection: NodesCollection, Keys: keys(FieldID, FieldProject, FieldVersion),
			Purpose: "a tree import checks its node ids against other projects' trees"},
	}
	for i := range out {
		out[i].Name = store.DefaultIndexName(out[i].Keys) // NodesIDIndex for the last
	}
	return out
}

// Store keeps the versions of every project's tree in a database. It is safe for concurrent
// use; loaded trees are cached by (project, version).
type Store struct {
	db  *mongo.Database
	now func() time.Time

	mu     sync.Mutex
	cache  map[cacheKey]*tree.Tree
	order  []cacheKey // insertion order, oldest first
	cached int        // nodes of the cached trees
	budget int        // cacheNodes (tests lower it)
	inIDs  int        // maxInIDs (tests lower it)
}

type cacheKey struct {
	project string
	version int
}

// New returns a Store over db. Writes use db's write concern: give it majority so an
// imported version survives a failover.
func New(db *mongo.Database) *Store {
	return &Store{db: db, now: time.Now, cache: map[cacheKey]*tree.Tree{}, budget: cacheNodes, inIDs: maxInIDs}
}

type treeDoc struct {
	ID            string    `bson:"_id"`
	Project       string    `bson:"project"`
	Version       int       `bson:"version"`
	EffectiveFrom time.Time `bson:"effective_from"`
	Nodes         int       `bson:"nodes"`
	Leaves        int       `bson:"leaves"`
	CreatedAt     time.Time `bson:"created_at"`
}

type nodeDoc struct {
	ID      string `bson:"_id"`
	Project string `bson:"project"`
	Version int    `bson:"version"`
	NodeID  string `bson:"id"`
	Type    string `bson:"type"`
	Parent  string `bson:"parent"`
	Seq     int    `bson:"seq"`
}

func (d treeDoc) version() Version {
	return Version{Project: d.Project, Version: d.Version, EffectiveFrom: d.EffectiveFrom.UTC(),
		Nodes: d.Nodes, Leaves: d.Leaves, CreatedAt: d.CreatedAt.UTC()}
}

func treeKey(project string, version int) string { return project + "/" + strconv.Itoa(version) }

// Import validates nodes as the tree of project and stores them as the project's next
// version, effective from the tick starting at effective, which must be aligned to
// tree.DefaultTick and not before the effective time of the project's latest version (so
// versions and their effective times have the same order; an equal time replaces the latest
// version from that tick). Node ids must not be used by the latest version of another project
// (ids are unique per deployment). It returns the new version number.
//
// The nodes are written first and the trees document last: a crash in between leaves no
// visible version, only unreferenced tree_nodes documents. The version number is reserved by a
// claim document, so concurrent imports get distinct numbers (a crashed import's number is
// skipped, leaving a gap).
func (s *Store) Import(ctx context.Context, project string, nodes []tree.Node, effective time.Time) (int, error) {
	t, err := tree.Build(project, nodes)
	if err != nil {
		return 0, err
	}
	if !tree.IsAligned(effective, tree.DefaultTick) {
		return 0, fmt.Errorf("effective time %s is not a tick start (a multiple of %s)", effective.UTC().Format(time.RFC3339Nano), tree.DefaultTick)
	}
	effective = effective.UTC()
	versions, err := s.Versions(ctx, project)
	if err != nil {
		return 0, err
	}
	next := 1
	if n := len(versions); n > 0 {
		latest := versions[n-1]
		for _, v := range versions {
			if v.EffectiveFrom.After(latest.EffectiveFrom) {
				latest = v
			}
		}
		if effective.Before(latest.EffectiveFrom) {
			return 0, fmt.Errorf("effective time %s is before %s, when version %d of project %q takes effect: trees change forward only",
				effective.Format(time.RFC3339), latest.EffectiveFrom.Format(time.RFC3339), latest.Version, project)
		}
		next = versions[n-1].Version + 1
	}
	if err := s.checkForeignIDs(ctx, t); err != nil {
		return 0, err
	}
	version, err := s.claim(ctx, project, next)
	if err != nil {
		return 0, err
	}
	if err := s.writeNodes(ctx, project, version, t); err != nil {
		s.abandon(ctx, project, version)
		return 0, err
	}
	doc := treeDoc{ID: treeKey(project, version), Project: project, Version: version, EffectiveFrom: effective,
		Nodes: t.Len(), Leaves: t.LeafCount(t.Root().ID), CreatedAt: s.now().UTC()}
	if _, err := s.db.Collection(TreesCollection).InsertOne(ctx, doc); err != nil {
		// The outcome is unknown (the insert may have been applied): leave the nodes in place.
		return 0, fmt.Errorf("commit version %d of project %q: %w", version, project, err)
	}
	s.put(cacheKey{project, version}, t)
	return version, nil
}

// claim reserves the first free version number from next on.
func (s *Store) claim(ctx context.Context, project string, next int) (int, error) {
	coll := s.db.Collection(NodesCollection)
	for v := next; v < next+maxClaims; v++ {
		doc := bson.D{{Key: "_id", Value: treeKey(project, v) + "/"}, {Key: FieldClaimedAt, Value: s.now().UTC()}}
		_, err := coll.InsertOne(ctx, doc)
		if err == nil {
			return v, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return 0, fmt.Errorf("claim version %d of project %q: %w", v, project, err)
		}
	}
	return 0, fmt.Errorf("claim a version of project %q: versions %d to %d are all taken by other imports", project, next, next+maxClaims-1)
}

// writeNodes inserts the node documents of a claimed version.
func (s *Store) writeNodes(ctx context.Context, project string, version int, t *tree.Tree) error {
	prefix := treeKey(project, version) + "/"
	all := t.Nodes()
	docs := make([]any, len(all))
	for i, n := range all {
		docs[i] = nodeDoc{ID: prefix + n.ID, Project: project, Version: version, NodeID: n.ID, Type: n.Type, Parent: n.Parent, Seq: i}
	}
	if _, err := s.db.Collection(NodesCollection).InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
		return fmt.Errorf("write nodes of version %d of project %q: %w", version, project, err)
	}
	return nil
}

// abandon removes what a failed import wrote, best effort (what stays is invisible anyway).
func (s *Store) abandon(ctx context.Context, project string, version int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	coll := s.db.Collection(NodesCollection)
	if _, err := coll.DeleteMany(ctx, bson.D{{Key: FieldProject, Value: project}, {Key: FieldVersion, Value: version}}); err != nil {
		return
	}
	_, _ = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: treeKey(project, version) + "/"}})
}

// maxInIDs bounds the node ids of one query of checkForeignIDs.
const maxInIDs = 1000

// checkForeignIDs rejects a tree sharing node ids with the latest version of another project
// (its highest committed version). It reads, through the NodesIDIndex index, the nodes of
// other projects that carry one of the tree's ids (one query per 1,000 ids), then the latest
// version of just the projects found; no other tree is loaded, so its cost follows the ids
// other projects share with this tree, not the number of projects. Nodes of a project's older
// versions and of uncommitted versions (a crashed import's) match the query and are dropped.
// When several projects collide, the first by name is reported, its ids in the tree's order.
//
// Like any check before a write, it does not serialize concurrent imports into two projects:
// each may pass before the other commits.
func (s *Store) checkForeignIDs(ctx context.Context, t *tree.Tree) error {
	nodes := t.Nodes()
	hits := map[string]map[int][]string{} // project -> version -> ids found
	ids := make([]string, 0, min(len(nodes), s.inIDs))
	for start := 0; start < len(nodes); start += s.inIDs {
		ids = ids[:0]
		for _, n := range nodes[start:min(start+s.inIDs, len(nodes))] {
			ids = append(ids, n.ID)
		}
		if err := s.foreignNodes(ctx, t.Project(), ids, hits); err != nil {
			return err
		}
	}
	if len(hits) == 0 {
		return nil
	}
	latest, err := s.latestVersions(ctx, slices.Sorted(maps.Keys(hits)))
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(hits)) {
		v, ok := latest[p]
		if !ok || len(hits[p][v]) == 0 {
			continue
		}
		used := make(map[string]bool, len(hits[p][v]))
		for _, id := range hits[p][v] {
			used[id] = true
		}
		var shared []string
		for _, n := range nodes {
			if used[n.ID] {
				shared = append(shared, n.ID)
			}
		}
		return fmt.Errorf("%w: %d node ids of project %q are used by project %q (version %d), and node ids are unique per deployment: %q",
			tree.ErrInvalid, len(shared), t.Project(), p, v, shared[:min(len(shared), 10)])
	}
	return nil
}

// foreignNodes adds to hits the (project, version, id) of every tree_nodes document of
// another project than project whose id is one of ids (one query).
func (s *Store) foreignNodes(ctx context.Context, project string, ids []string, hits map[string]map[int][]string) error {
	filter := bson.D{
		{Key: FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: FieldProject, Value: bson.D{{Key: "$ne", Value: project}}},
	}
	// The projection is NodesIDIndex's key without _id, so MongoDB can answer from the index alone.
	proj := bson.D{{Key: "_id", Value: 0}, {Key: FieldID, Value: 1}, {Key: FieldProject, Value: 1}, {Key: FieldVersion, Value: 1}}
	cur, err := s.db.Collection(NodesCollection).Find(ctx, filter, options.Find().SetProjection(proj))
	if err != nil {
		return fmt.Errorf("find node ids of other projects: %w", err)
	}
	var docs []struct {
		ID      string `bson:"id"`
		Project string `bson:"project"`
		Version int    `bson:"version"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return fmt.Errorf("find node ids of other projects: %w", err)
	}
	for _, d := range docs {
		if hits[d.Project] == nil {
			hits[d.Project] = map[int][]string{}
		}
		hits[d.Project][d.Version] = append(hits[d.Project][d.Version], d.ID)
	}
	return nil
}

// latestVersions returns the highest committed version of each of projects that has one, one
// query per 1,000 projects (through the trees index on project).
func (s *Store) latestVersions(ctx context.Context, projects []string) (map[string]int, error) {
	out := make(map[string]int, len(projects))
	for start := 0; start < len(projects); start += maxInProjects {
		chunk := projects[start:min(start+maxInProjects, len(projects))]
		cur, err := s.db.Collection(TreesCollection).Find(ctx, bson.D{{Key: FieldProject, Value: bson.D{{Key: "$in", Value: chunk}}}},
			options.Find().SetProjection(bson.D{{Key: FieldProject, Value: 1}, {Key: FieldVersion, Value: 1}}))
		if err != nil {
			return nil, fmt.Errorf("find the latest tree versions of %d projects: %w", len(chunk), err)
		}
		var docs []struct {
			Project string `bson:"project"`
			Version int    `bson:"version"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("find the latest tree versions of %d projects: %w", len(chunk), err)
		}
		for _, d := range docs {
			out[d.Project] = max(out[d.Project], d.Version)
		}
	}
	return out, nil
}

// Load returns version of project's tree (ErrNotFound when it was never committed).
func (s *Store) Load(ctx context.Context, project string, version int) (*tree.Tree, error) {
	key := cacheKey{project, version}
	if t := s.get(key); t != nil {
		return t, nil
	}
	var td treeDoc
	err := s.db.Collection(TreesCollection).FindOne(ctx, bson.D{{Key: "_id", Value: treeKey(project, version)}}).Decode(&td)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("%w: project %q version %d", ErrNotFound, project, version)
	}
	if err != nil {
		return nil, fmt.Errorf("load version %d of project %q: %w", version, project, err)
	}
	cur, err := s.db.Collection(NodesCollection).Find(ctx, bson.D{{Key: FieldProject, Value: project}, {Key: FieldVersion, Value: version}})
	if err != nil {
		return nil, fmt.Errorf("load nodes of version %d of project %q: %w", version, project, err)
	}
	docs := make([]nodeDoc, 0, td.Nodes)
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("load nodes of version %d of project %q: %w", version, project, err)
	}
	if len(docs) != td.Nodes {
		return nil, fmt.Errorf("version %d of project %q has %d nodes stored, its trees document says %d", version, project, len(docs), td.Nodes)
	}
	slices.SortFunc(docs, func(a, b nodeDoc) int { return a.Seq - b.Seq })
	nodes := make([]tree.Node, len(docs))
	for i, d := range docs {
		nodes[i] = tree.Node{ID: d.NodeID, Type: d.Type, Parent: d.Parent}
	}
	t, err := tree.Build(project, nodes)
	if err != nil {
		return nil, fmt.Errorf("stored version %d of project %q: %w", version, project, err)
	}
	s.put(key, t)
	return t, nil
}

// VersionAt returns the version of project's tree that applies to the tick starting at tick:
// the one with the largest effective_from <= tick (the larger version number on a tie). ok is
// false when no version is effective yet.
func (s *Store) VersionAt(ctx context.Context, project string, tick time.Time) (version int, effectiveFrom time.Time, ok bool, err error) {
	filter := bson.D{{Key: FieldProject, Value: project}, {Key: FieldEffectiveFrom, Value: bson.D{{Key: "$lte", Value: tick}}}}
	opts := options.FindOne().SetSort(bson.D{{Key: FieldEffectiveFrom, Value: -1}, {Key: FieldVersion, Value: -1}})
	var td treeDoc
	err = s.db.Collection(TreesCollection).FindOne(ctx, filter, opts).Decode(&td)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("find tree version of project %q at %s: %w", project, tick.UTC().Format(time.RFC3339), err)
	}
	return td.Version, td.EffectiveFrom.UTC(), true, nil
}

// maxInProjects bounds the projects of one VersionsAt query.
const maxInProjects = 1000

// VersionsAt returns, for each of projects that has a version effective at the tick starting
// at tick, that version (the rule of VersionAt); projects without one are absent. It reads
// the versions effective by tick through the (project, effective_from, version) index, one
// query per 1,000 projects.
func (s *Store) VersionsAt(ctx context.Context, projects []string, tick time.Time) (map[string]Version, error) {
	out := make(map[string]Version, len(projects))
	for start := 0; start < len(projects); start += maxInProjects {
		chunk := projects[start:min(start+maxInProjects, len(projects))]
		filter := bson.D{
			{Key: FieldProject, Value: bson.D{{Key: "$in", Value: chunk}}},
			{Key: FieldEffectiveFrom, Value: bson.D{{Key: "$lte", Value: tick}}},
		}
		cur, err := s.db.Collection(TreesCollection).Find(ctx, filter)
		if err != nil {
			return nil, fmt.Errorf("find tree versions at %s: %w", tick.UTC().Format(time.RFC3339), err)
		}
		var docs []treeDoc
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("find tree versions at %s: %w", tick.UTC().Format(time.RFC3339), err)
		}
		for _, d := range docs {
			v := d.version()
			cur, ok := out[v.Project]
			if !ok || v.EffectiveFrom.After(cur.EffectiveFrom) || v.EffectiveFrom.Equal(cur.EffectiveFrom) && v.Version > cur.Version {
				out[v.Project] = v
			}
		}
	}
	return out, nil
}

// Versions returns every committed version of project's tree, by version number.
func (s *Store) Versions(ctx context.Context, project string) ([]Version, error) {
	cur, err := s.db.Collection(TreesCollection).Find(ctx, bson.D{{Key: FieldProject, Value: project}},
		options.Find().SetSort(bson.D{{Key: FieldVersion, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list tree versions of project %q: %w", project, err)
	}
	var docs []treeDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list tree versions of project %q: %w", project, err)
	}
	out := make([]Version, len(docs))
	for i, d := range docs {
		out[i] = d.version()
	}
	return out, nil
}

// Projects returns the projects that have at least one committed tree, sorted.
func (s *Store) Projects(ctx context.Context) ([]string, error) {
	var out []string
	if err := store.DistinctInto(s.db.Collection(TreesCollection).Distinct(ctx, FieldProject, bson.D{}), &out); err != nil {
		return nil, fmt.Errorf("list tree projects: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

func (s *Store) get(k cacheKey) *tree.Tree {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache[k]
}

func (s *Store) put(k cacheKey, t *tree.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache[k]; ok {
		return
	}
	for len(s.order) > 0 && s.cached+t.Len() > s.budget {
		s.cached -= s.cache[s.order[0]].Len()
		delete(s.cache, s.order[0])
		s.order = s.order[1:]
	}
	s.cache[k] = t
	s.order = append(s.order, k)
	s.cached += t.Len()
}
