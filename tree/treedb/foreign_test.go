package treedb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
)

// chain builds a tree of ids under root: each id's parent is the one before it.
func chain(root string, ids ...string) []tree.Node {
	nodes := []tree.Node{{ID: root, Type: "project"}}
	for i, id := range ids {
		nodes = append(nodes, tree.Node{ID: id, Type: "t", Parent: nodes[i].ID})
	}
	return nodes
}

// crashImport claims the next version of project and writes its nodes without committing
// them, as an import that crashed before its trees document does.
func crashImport(ctx context.Context, t *testing.T, s *Store, project string, next int, nodes []tree.Node) int {
	t.Helper()
	tr, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.claim(ctx, project, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeNodes(ctx, project, v, tr); err != nil {
		t.Fatal(err)
	}
	return v
}

// reversed returns a reversed copy of ids.
func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

// TestImportForeignIDsLatestOnly: only the latest committed version of another project
// counts; ids of its older versions, of a crashed import's nodes and of the project's own
// versions are free. Of several colliding projects the first by name is named, with the count
// of shared ids and the first 10 in the tree's order.
func TestImportForeignIDsLatestOnly(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	imp := func(project string, nodes []tree.Node) error {
		t.Helper()
		_, err := s.Import(ctx, project, nodes, t0)
		return err
	}
	if err := imp("a", chain("ra", "x", "y")); err != nil {
		t.Fatal(err)
	}
	if err := imp("a", chain("ra", "y")); err != nil { // a's latest no longer has x
		t.Fatal(err)
	}
	crashImport(ctx, t, s, "c", 1, chain("rc", "z"))
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("m%02d", i))
	}
	if err := imp("d", chain("rd", many...)); err != nil {
		t.Fatal(err)
	}
	if err := imp("e", chain("re", "m11", "w")); err == nil || !strings.Contains(err.Error(), `used by project "d"`) {
		t.Fatalf("e sharing m11 with d: %v", err)
	}
	for _, tc := range []struct {
		name    string
		project string
		nodes   []tree.Node
		want    string // "" = accepted
	}{
		{"id of another project's old version", "b", chain("rb", "x"), ""},
		{"id of a crashed import", "b", chain("rb", "z"), ""},
		{"own ids", "a", chain("ra", "x", "y"), ""},
		{"latest version", "b", chain("rb", "q", "y"), `invalid name: 1 node ids of project "b" are used by project "a" (version 3), and node ids are unique per deployment: ["y"]`},
		{"more than 10 ids, in the tree's order", "g", chain("rg", reversed(many)...),
			`invalid name: 12 node ids of project "g" are used by project "d" (version 1), and node ids are unique per deployment: ["m11" "m10" "m09" "m08" "m07" "m06" "m05" "m04" "m03" "m02"]`},
		{"two projects: the first by name", "h", chain("rh", slices.Concat(many, []string{"y"})...),
			`invalid name: 1 node ids of project "h" are used by project "a" (version 3), and node ids are unique per deployment: ["y"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := imp(tc.project, tc.nodes)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, tree.ErrInvalid)):
				t.Fatalf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// modelVersion is one version of a project's tree in the naive model of
// TestForeignIDCheckRandom.
type modelVersion struct {
	version   int
	ids       []string
	committed bool
}

// naiveForeignIDs is the rule as it stood before the tree_nodes id index: load the latest
// committed version of every other project, by name, and compare the tree's ids with it.
func naiveForeignIDs(model map[string][]modelVersion, project string, nodes []tree.Node) string {
	for _, p := range slices.Sorted(maps.Keys(model)) {
		if p == project {
			continue
		}
		latest := -1
		for i, v := range model[p] {
			if v.committed && (latest < 0 || v.version > model[p][latest].version) {
				latest = i
			}
		}
		if latest < 0 {
			continue
		}
		var shared []string
		for _, n := range nodes {
			if slices.Contains(model[p][latest].ids, n.ID) {
				shared = append(shared, n.ID)
			}
		}
		if len(shared) > 0 {
			return fmt.Sprintf("%v: %d node ids of project %q are used by project %q (version %d), and node ids are unique per deployment: %q",
				tree.ErrInvalid, len(shared), project, p, model[p][latest].version, shared[:min(len(shared), 10)])
		}
	}
	return ""
}

// TestForeignIDCheckRandom cross-checks Import's id check with naiveForeignIDs over random
// imports into a few small projects whose trees borrow each other's ids, re-import their own
// (so ids become used only by old versions) or crash before their commit (uncommitted
// nodes). Imports go through one Store and through fresh Stores querying 1 to 4 ids at a time
// (several chunks per tree).
func TestForeignIDCheckRandom(t *testing.T) {
	ctx, db, _ := setup(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	const projects, idsPerProject, rounds = 8, 10, 300
	shared := New(db)
	model := map[string][]modelVersion{}
	var accepted, rejected, crashed, oldOnly int
	for round := range rounds {
		p := rng.IntN(projects)
		project := fmt.Sprintf("p%d", p)
		ids := []string{"root-" + project}
		for range 1 + rng.IntN(6) {
			owner := p
			if rng.IntN(4) == 0 {
				owner = rng.IntN(projects)
			}
			if id := fmt.Sprintf("p%d-n%d", owner, rng.IntN(idsPerProject)); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		nodes := []tree.Node{{ID: ids[0], Type: "project"}}
		for _, id := range ids[1:] {
			nodes = append(nodes, tree.Node{ID: id, Type: "t", Parent: nodes[rng.IntN(len(nodes))].ID})
		}
		want := naiveForeignIDs(model, project, nodes)
		next := 1
		for _, v := range model[project] {
			if v.committed {
				next = max(next, v.version+1)
			}
		}
		if want == "" && rng.IntN(10) == 0 {
			v := crashImport(ctx, t, shared, project, next, nodes)
			model[project] = append(model[project], modelVersion{version: v, ids: ids})
			crashed++
			continue
		}
		s := shared
		if rng.IntN(2) == 0 {
			s = New(db)
			s.inIDs = 1 + rng.IntN(4)
		}
		v, err := s.Import(ctx, project, nodes, t0)
		if want != "" {
			if err == nil || err.Error() != want || !errors.Is(err, tree.ErrInvalid) {
				t.Fatalf("round %d: import %v into %s = %d, %v\nwant %s", round, ids, project, v, err, want)
			}
			rejected++
			continue
		}
		if err != nil {
			t.Fatalf("round %d: import %v into %s: %v; the naive rule accepts it", round, ids, project, err)
		}
		for _, m := range model[project] {
			if v <= m.version {
				t.Fatalf("round %d: import into %s got version %d, not above %d", round, project, v, m.version)
			}
		}
		for q, vs := range model {
			for _, m := range vs {
				if q != project && slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(m.ids, id) }) {
					oldOnly++ // accepted although another project's old or uncommitted version has an id
				}
			}
		}
		model[project] = append(model[project], modelVersion{version: v, ids: ids, committed: true})
		accepted++
	}
	t.Logf("%d imports accepted (%d sharing ids with old or uncommitted versions of other projects), %d rejected, %d crashed",
		accepted, oldOnly, rejected, crashed)
	if accepted < rounds/10 || rejected < rounds/10 || oldOnly == 0 || crashed == 0 {
		t.Fatalf("the random imports did not exercise every case: %d accepted (%d sharing old ids), %d rejected, %d crashed",
			accepted, oldOnly, rejected, crashed)
	}
}

// TestImportCommandsIndependentOfProjects counts the store commands of one import, through a
// counting proxy, into deployments of 3 and of 30 other projects (one sharing an id with the
// new tree, so every query of the check runs): the same number, whatever the projects.
func TestImportCommandsIndependentOfProjects(t *testing.T) {
	ctx := testctx.Context(t)
	srv := embeddedtest.Start(t)
	p := blackpipe.New(options.Client().ApplyURI(srv.URI).Hosts[0], zap.NewNop())
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	via := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", p.Addr())}
	client := via.Client(t)
	commands := map[int]map[string]int{}
	for _, others := range []int{3, 30} {
		db := srv.Database(t, client)
		for _, ix := range Indexes() {
			if _, err := db.Collection(ix.Collection).Indexes().CreateOne(ctx, ix.Model()); err != nil {
				t.Fatal(err)
			}
		}
		for i := range others {
			project := fmt.Sprintf("o%02d", i)
			if _, err := New(db).Import(ctx, project, chain("r"+project, project+"-a", project+"-b"), t0); err != nil {
				t.Fatal(err)
			}
		}
		p.ResetStats()
		_, err := New(db).Import(ctx, "new", chain("rnew", "o00-b", "n1"), t0)
		if err == nil || !strings.Contains(err.Error(), `used by project "o00"`) {
			t.Fatalf("import sharing o00-b: %v", err)
		}
		if _, err := New(db).Import(ctx, "new", chain("rnew", "n1", "n2"), t0); err != nil {
			t.Fatal(err)
		}
		commands[others] = p.Stats().Commands
		t.Logf("%d other projects: %v", others, commands[others])
	}
	for _, cmd := range []string{"find", "insert", "getMore"} {
		if commands[3][cmd] != commands[30][cmd] {
			t.Errorf("%s commands of two imports: %d among 3 other projects, %d among 30", cmd, commands[3][cmd], commands[30][cmd])
		}
	}
	// Versions, then the id check (one find of nodes; a latest-versions find when one is found).
	if commands[30]["find"] != 5 {
		t.Errorf("find commands of two imports: %d, want 5", commands[30]["find"])
	}
}
