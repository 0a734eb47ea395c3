package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

const opsProject = "ops"

// opsT0 is the first tick of the tests' windows.
var opsT0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// opsEnv is a migrated store with a generated tree imported with treedb and leaves written
// through bulk.Writer at nTicks ticks from opsT0; no parents yet.
type opsEnv struct {
	t      testing.TB
	ctx    context.Context
	db     *mongo.Database
	counts *mongo.Collection
	tr     *tree.Tree
	ticks  []time.Time
	uri    string
}

func newOpsEnv(t testing.TB, groups, servers, processes, nTicks int) *opsEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	nodes := tree.Generate(opsProject, groups, servers, processes)
	if _, err := treedb.New(db).Import(ctx, opsProject, nodes, opsT0.Add(-24*time.Hour)); err != nil {
		t.Fatalf("import tree: %v", err)
	}
	tr, err := tree.Build(opsProject, nodes)
	if err != nil {
		t.Fatal(err)
	}
	e := &opsEnv{t: t, ctx: ctx, db: db, counts: db.Collection(store.CountsCollection), tr: tr, uri: srv.URI}
	var items []bulk.Item
	for i := range nTicks {
		at := opsT0.Add(time.Duration(i) * tree.DefaultTick)
		e.ticks = append(e.ticks, at)
		for j, l := range tr.Leaves() {
			if (i+j)%7 == 3 {
				continue // not reported at this tick; see reported
			}
			items = append(items, leafItem(l.ID, l.Type, at, int64((i*j)%5+1), 1))
		}
	}
	e.submit(items...)
	return e
}

// reported reports whether the leaf id has a document at the i-th tick (newOpsEnv leaves
// one leaf in seven out).
func (e *opsEnv) reported(i int, id string) bool {
	for j, l := range e.tr.Leaves() {
		if l.ID == id {
			return (i+j)%7 != 3
		}
	}
	return false
}

func leafItem(id, typ string, at time.Time, online, version int64) bulk.Item {
	return bulk.Item{Key: bulk.Key{ID: id, Type: typ, Timestamp: at}, Project: opsProject, Online: online,
		Version: version, SubmissionID: fmt.Sprintf("s-%s-%d", id, version)}
}

// submit writes leaves as the ingest API does: through a bulk.Writer.
func (e *opsEnv) submit(items ...bulk.Item) {
	e.t.Helper()
	w := bulk.New(e.counts, bulk.Options{}, zap.NewNop())
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	res, err := w.Submit(e.ctx, items)
	cancel()
	if rerr := <-done; rerr != nil {
		e.t.Fatalf("bulk writer: %v", rerr)
	}
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	for i, r := range res {
		if r.Outcome != bulk.OutcomeApplied {
			e.t.Fatalf("item %d: %v %v", i, r.Outcome, r.Err)
		}
	}
}

// cmd runs one rollup subcommand against the env's database and returns stdout, stderr and
// the error; stderr may be replaced (to watch progress).
func (e *opsEnv) cmd(ctx context.Context, stderr io.Writer, args ...string) (string, error) {
	e.t.Helper()
	var out strings.Builder
	if stderr == nil {
		stderr = io.Discard
	}
	args = append(args, "--mongodb-uri", e.uri, "--database", e.db.Name())
	err := run(ctx, &env{stdout: &out, stderr: stderr}, args)
	return out.String(), err
}

func (e *opsEnv) window() []string {
	return []string{"--project", opsProject, "--from", e.ticks[0].Format(time.RFC3339),
		"--to", e.ticks[len(e.ticks)-1].Add(tree.DefaultTick).Format(time.RFC3339)}
}

func (e *opsEnv) replay(extra ...string) string {
	e.t.Helper()
	out, err := e.cmd(e.ctx, nil, append(append([]string{"replay"}, e.window()...), extra...)...)
	if err != nil {
		e.t.Fatalf("replay: %v\n%s", err, out)
	}
	return out
}

// verify runs rollup verify and returns its output and exit code.
func (e *opsEnv) verify() (string, int) {
	e.t.Helper()
	out, err := e.cmd(e.ctx, nil, append([]string{"verify", "--max", "100"}, e.window()...)...)
	return out, exitCode(io.Discard, err)
}

func (e *opsEnv) mustVerify() {
	e.t.Helper()
	if out, code := e.verify(); code != 0 || !strings.Contains(out, "no violations") {
		e.t.Fatalf("verify exit %d:\n%s", code, out)
	}
}

// parentsOnly counts the parents of the tree.
func (e *opsEnv) parents() int {
	n := 0
	for _, nd := range e.tr.Nodes() {
		if !e.tr.IsLeaf(nd.ID) {
			n++
		}
	}
	return n
}

// snapshot returns every document of the counts collection, in _id order.
func (e *opsEnv) snapshot() []string {
	e.t.Helper()
	cur, err := e.counts.Find(e.ctx, bson.D{})
	if err != nil {
		e.t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(e.ctx, &docs); err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.String()
	}
	slices.Sort(out)
	return out
}

func (e *opsEnv) parentDoc(id, typ string, at time.Time) (rollup.Parent, bson.Raw) {
	e.t.Helper()
	raw, err := e.counts.FindOne(e.ctx, keyFilter(id, typ, at)).Raw()
	if err != nil {
		e.t.Fatalf("find %s: %v", id, err)
	}
	p, err := store.DecodeParent(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	return p, raw
}

func keyFilter(id, typ string, at time.Time) bson.D {
	return bson.D{{Key: store.FieldID, Value: id}, {Key: store.FieldType, Value: typ}, {Key: store.FieldTimestamp, Value: at}}
}

func (e *opsEnv) store(p rollup.Parent) {
	e.t.Helper()
	if _, err := e.counts.UpdateOne(e.ctx, keyFilter(p.ID, p.Type, p.Timestamp), store.ParentUpdate(p, time.Now())); err != nil {
		e.t.Fatal(err)
	}
}

func wantAll(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

func TestParseReplayVerify(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	from, to := "2024-05-01T10:00:00Z", "2024-05-01T11:00:00+01:00"
	t1 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		args    []string
		replay  replayConfig
		verify  verifyConfig
		wantErr string
	}{
		{args: []string{"--project", "p", "--from", from, "--to", "2024-05-01T10:15:00Z", "--mongodb-uri", "mongodb://m"},
			replay: replayConfig{window: windowFlags{"p", t1, t1.Add(15 * time.Minute)}, progress: "auto", logLevel: "warn", store: storeFlags{"mongodb://m", "rollup"}},
			verify: verifyConfig{window: windowFlags{"p", t1, t1.Add(15 * time.Minute)}, max: 20, store: storeFlags{"mongodb://m", "rollup"}}},
		{args: []string{"--project", "p", "--from", from, "--to", to, "--mongodb-uri", "mongodb://m"}, wantErr: "must be after --from"},
		{args: []string{"--project", "p", "--from", from, "--to", "2024-07-01T00:00:00Z", "--mongodb-uri", "mongodb://m"}, wantErr: "longer than"},
		{args: []string{"--from", from, "--to", to, "--mongodb-uri", "mongodb://m"}, wantErr: "--project is required"},
		{args: []string{"--project", "p", "--to", to, "--mongodb-uri", "mongodb://m"}, wantErr: "--from and --to are required"},
		{args: []string{"--project", "p", "--from", "10:00", "--to", to, "--mongodb-uri", "mongodb://m"}, wantErr: "--from"},
		{args: []string{"--project", "p", "--from", from, "--to", "x", "--mongodb-uri", "mongodb://m"}, wantErr: "--to"},
		{args: []string{"--project", "p", "--from", from, "--to", "2024-05-01T10:15:00Z"}, wantErr: "pass --mongodb-uri"},
		{args: []string{"--project", "p", "--from", from, "--to", "2024-05-01T10:15:00Z", "--mongodb-uri", "mongodb://m", "--database", ""}, wantErr: "--database"},
		{args: []string{"--project", "p", "--from", from, "--to", "2024-05-01T10:15:00Z", "--mongodb-uri", "mongodb://m", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"--bogus"}, wantErr: "bogus"},
	}
	for _, tc := range tests {
		e := &env{stdout: io.Discard, stderr: io.Discard}
		r, rerr := parseReplay(e, tc.args)
		v, verr := parseVerify(e, tc.args)
		if tc.wantErr != "" {
			for _, err := range []error{rerr, verr} {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
				}
			}
			continue
		}
		if rerr != nil || r != tc.replay {
			t.Errorf("replay %v: got %+v, %v; want %+v", tc.args, r, rerr, tc.replay)
		}
		if verr != nil || v != tc.verify {
			t.Errorf("verify %v: got %+v, %v; want %+v", tc.args, v, verr, tc.verify)
		}
	}
	ok := []string{"--project", "p", "--from", from, "--to", "2024-05-01T10:15:00Z", "--mongodb-uri", "mongodb://m"}
	for _, extra := range [][]string{{"--dry-run", "--progress", "lines"}, {"--progress", "bar"}, {"--progress", "none"}} {
		if _, err := parseReplay(&env{stdout: io.Discard, stderr: io.Discard}, append(slices.Clone(ok), extra...)); err != nil {
			t.Errorf("replay %v: %v", extra, err)
		}
	}
	if _, err := parseReplay(&env{stdout: io.Discard, stderr: io.Discard}, append(slices.Clone(ok), "--progress", "fancy")); err == nil {
		t.Error("--progress fancy accepted")
	}
	if _, err := parseVerify(&env{stdout: io.Discard, stderr: io.Discard}, append(slices.Clone(ok), "--max", "-1")); err == nil {
		t.Error("--max -1 accepted")
	}
}

// TestHelp checks that every subcommand's --help exits 0 and shows examples, and that
// 'rollup help' lists every subcommand and the exit codes.
func TestHelp(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	var out strings.Builder
	if err := run(context.Background(), &env{stdout: &out, stderr: io.Discard}, []string{"help"}); err != nil {
		t.Fatal(err)
	}
	for name := range commands() {
		wantAll(t, "rollup help", out.String(), "\n  "+name+" ")
		var errOut strings.Builder
		err := run(context.Background(), &env{stdout: io.Discard, stderr: &errOut}, []string{name, "--help"})
		if err != nil {
			t.Errorf("%s --help: %v", name, err)
		}
		wantAll(t, name+" --help", errOut.String(), "usage: rollup "+name, "Examples:")
	}
	wantAll(t, "rollup help", out.String(), "Exit status: 0 success, 1 failure", "2 usage error")
}

// TestReplayVerify builds the parents with rollup replay, then seeds each failure shape, checks
// that verify reports it with exit 1 and that the repair (replay, or for duplicates removing
// the extra document and restoring the index) makes verify pass again.
func TestReplayVerify(t *testing.T) {
	e := newOpsEnv(t, 2, 3, 4, 3)
	out := e.replay("--progress", "none")
	leaves := 0
	for i := range e.ticks {
		for _, l := range e.tr.Leaves() {
			if e.reported(i, l.ID) {
				leaves++
			}
		}
	}
	wantAll(t, "replay summary", out, fmt.Sprintf("replayed project ops [2024-05-01T10:00:00Z, 2024-05-01T10:15:00Z): 3 ticks, %d leaves, %d parent writes (0 conflicts), 0 orphans, 0 invalid in ",
		leaves, 3*e.parents()))
	// The replay is recorded for the charts' annotations, with its window.
	evs, err := store.NewEvents(e.db).Range(e.ctx, "ops", opsT0, opsT0.Add(time.Hour), 10)
	if err != nil || len(evs) != 1 || evs[0].Kind != store.EventReplay || !evs[0].At.Equal(opsT0) || !evs[0].End.Equal(opsT0.Add(15*time.Minute)) ||
		!strings.Contains(evs[0].Text, "3 ticks") {
		t.Fatalf("recorded events %+v, %v; want the replay of [10:00, 10:15)", evs, err)
	}
	e.mustVerify()
	vout, _ := e.verify()
	wantAll(t, "verify", vout, fmt.Sprintf("3 ticks, %d (node, tick) checked, %d leaf documents, 0 orphan leaves", 3*e.parents(), leaves),
		"unique index id_1_type_1_timestamp_1: ok")
	if again := e.replay("--progress", "none"); !strings.Contains(again, " 0 parent writes") {
		t.Fatalf("second replay wrote: %s", again)
	}

	at := e.ticks[1]
	server := e.tr.Levels()[1][0] // deepest first: processes, servers, groups, root
	group, _ := e.tr.Parent(server.ID)

	t.Run("doubled server", func(t *testing.T) {
		p, _ := e.parentDoc(server.ID, server.Type, at)
		good := p.Online
		p.Online *= 2
		e.store(p)
		out, code := e.verify()
		if code != 1 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		// The server's hourly and daily summaries, written before the damage, no longer
		// match its 5-minute documents either.
		wantAll(t, "verify", out, "violations (recompute 1, sum 1, summary 2)",
			fmt.Sprintf("sum       %s (server) at %s: online stored %d, expected %d: not the sum over its %d children: exactly twice the sum",
				server.ID, at.Format(time.RFC3339), 2*good, good, len(p.Children)),
			fmt.Sprintf("recompute %s (server) at %s: online stored %d, expected %d", server.ID, at.Format(time.RFC3339), 2*good, good),
			"repair, in this order, then verify again:\n  1. rollup replay --project ops --from 2024-05-01T10:00:00Z --to 2024-05-01T10:15:00Z\n     (sum, recompute, summary: ")

		before := e.snapshot()
		dry := e.replay("--dry-run")
		want := fmt.Sprintf("%s %s %d %d\ndry run project ops [2024-05-01T10:00:00Z, 2024-05-01T10:15:00Z): 3 ticks, %d leaves, 1 parents would change; nothing written\n",
			server.ID, at.Format(time.RFC3339), 2*good, good, leaves)
		if dry != want {
			t.Fatalf("dry run:\n%s\nwant:\n%s", dry, want)
		}
		if after := e.snapshot(); !slices.Equal(before, after) {
			t.Fatal("the dry run wrote")
		}
		e.replay("--progress", "none")
		e.mustVerify()
	})

	t.Run("dip from duplicate parents", func(t *testing.T) {
		// The original system had no unique index: drop it to store a second group document
		// with a partial total, as it did.
		if err := e.counts.Indexes().DropOne(e.ctx, store.CountsKeyIndex); err != nil {
			t.Fatal(err)
		}
		p, _ := e.parentDoc(group.ID, group.Type, at)
		partial := p
		partial.Children = map[string]rollup.ChildState{}
		partial.Online, partial.Reported = 0, 0
		for id, st := range p.Children {
			partial.Children[id] = st
			partial.Online += st.Online
			partial.Reported += st.Reported
			break
		}
		set := store.ParentFields(partial, time.Now())
		res, err := e.counts.InsertOne(e.ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		out, code := e.verify()
		if code != 1 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		wantAll(t, "verify", out, "duplicate 1", "index 1",
			fmt.Sprintf("duplicate %s (group) at %s: documents stored 2, expected 1: readers may see either document: online %d", group.ID, at.Format(time.RFC3339), p.Online),
			fmt.Sprintf("online %d", partial.Online),
			fmt.Sprintf("recompute %s (group) at %s: online stored %d, expected %d", group.ID, at.Format(time.RFC3339), partial.Online, p.Online),
			"index     index id_1_type_1_timestamp_1 on counts is missing",
			"  1. rollup migrate up\n     (duplicate, index: removes the duplicate documents (keeping the newest of each key) and rebuilds the unique index",
			"  2. rollup replay --project ops --from 2024-05-01T10:00:00Z --to 2024-05-01T10:15:00Z\n     (recompute, summary: ")
		// The repair verify prints: migrate up (the newer, partial document is the one kept),
		// then replay.
		out, err = e.cmd(e.ctx, nil, "migrate", "up")
		if err != nil {
			t.Fatalf("migrate up: %v\n%s", err, out)
		}
		wantAll(t, "migrate up", out, "schema drift: index id_1_type_1_timestamp_1 on counts is missing",
			"repaired: ran step 1", "kept:    _id="+res.InsertedID.(bson.ObjectID).Hex(), "removed: _id=")
		if out, code := e.verify(); code != 1 || strings.Contains(out, "duplicate") || strings.Contains(out, "index     ") {
			t.Fatalf("after migrate up, only the totals are left to replay; exit %d:\n%s", code, out)
		}
		e.replay("--progress", "none")
		e.mustVerify()
	})

	t.Run("orphan counted", func(t *testing.T) {
		e.submit(leafItem("ghost-p01", tree.TypeProcess, at, 7, 1))
		out, code := e.verify()
		if code != 0 {
			t.Fatalf("an uncounted orphan is no violation: exit %d:\n%s", code, out)
		}
		wantAll(t, "verify", out, "1 orphan leaves")
		p, _ := e.parentDoc(server.ID, server.Type, at)
		p.Children["ghost-p01"] = rollup.ChildState{Type: tree.TypeProcess, Online: 7, Version: 1, Reported: 1, Expected: 1}
		p.Online += 7
		p.Reported++
		p.Rev++
		e.store(p)
		out, code = e.verify()
		if code != 1 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		wantAll(t, "verify", out, fmt.Sprintf("orphan    %s (server) at %s: children.ghost-p01.online stored 7, expected 0: orphan leaf (not in tree version 1) counted",
			server.ID, at.Format(time.RFC3339)), "recompute 2")
		e.replay("--progress", "none")
		e.mustVerify()
	})

	t.Run("stale child and missing parent", func(t *testing.T) {
		var leaf tree.Node
		for _, l := range e.tr.Children(server.ID) {
			if e.reported(1, l.ID) {
				leaf = l
			}
		}
		if leaf.ID == "" {
			t.Fatal("no reported leaf under the server")
		}
		e.submit(leafItem(leaf.ID, leaf.Type, at, 40, 2)) // no watcher: its parents miss it
		other := e.tr.Levels()[1][1]
		if _, err := e.counts.DeleteOne(e.ctx, keyFilter(other.ID, other.Type, at)); err != nil {
			t.Fatal(err)
		}
		out, code := e.verify()
		if code != 1 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		wantAll(t, "verify", out, fmt.Sprintf("child     %s (server) at %s: children.%s.online stored", server.ID, at.Format(time.RFC3339), leaf.ID),
			"expected 40: stale: the leaf has online 40 version 2",
			fmt.Sprintf("missing   %s (server) at %s: online stored 0", other.ID, at.Format(time.RFC3339)))
		e.replay("--progress", "none")
		e.mustVerify()
	})
}

// TestReplayInterruptAndResume cancels a replay after its first tick, checks that verify then
// fails and the printed resume command finishes the job.
func TestReplayInterruptAndResume(t *testing.T) {
	e := newOpsEnv(t, 2, 2, 3, 3)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	w := &cancelWriter{cancelOn: "1/3 ticks", cancel: cancel}
	out, err := e.cmd(ctx, w, append([]string{"replay", "--progress", "lines"}, e.window()...)...)
	if !errors.Is(err, context.Canceled) || exitCode(io.Discard, err) != 1 {
		t.Fatalf("interrupted replay: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`resume: rollup replay (.*)\n`).FindStringSubmatch(out)
	if !strings.HasPrefix(out, "interrupted project ops") || m == nil {
		t.Fatalf("output:\n%s", out)
	}
	if want := "--project ops --from " + e.ticks[1].Format(time.RFC3339) + " --to 2024-05-01T10:15:00Z"; m[1] != want {
		t.Fatalf("resume %q, want %q", m[1], want)
	}
	if vout, code := e.verify(); code != 1 || !strings.Contains(vout, "missing") {
		t.Fatalf("verify after the interrupt: exit %d\n%s", code, vout)
	}
	out, err = e.cmd(e.ctx, nil, append([]string{"replay"}, strings.Fields(m[1])...)...)
	if err != nil || !strings.Contains(out, "replayed project ops [2024-05-01T10:05:00Z, 2024-05-01T10:15:00Z): 2 ticks") {
		t.Fatalf("resumed replay: %v\n%s", err, out)
	}
	e.mustVerify()
}

// cancelWriter cancels a context once its output contains cancelOn.
type cancelWriter struct {
	mu       sync.Mutex
	b        strings.Builder
	cancelOn string
	cancel   context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.cancelOn) {
		w.cancel()
	}
	return len(p), nil
}

// TestReplayProgressOutput runs replay with both progress modes into a buffer.
func TestReplayProgressOutput(t *testing.T) {
	e := newOpsEnv(t, 1, 2, 2, 3)
	var lines, bar strings.Builder
	if _, err := e.cmd(e.ctx, &lines, append([]string{"replay", "--progress", "lines"}, e.window()...)...); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^replay: 1/3 ticks, \d+ leaves, \d+ leaves/s, \d+ parent writes, tick 2024-05-01T10:00:00Z, eta \S+\n(.*\n)*replay: 3/3 ticks, 9 leaves, \d+ leaves/s, 12 parent writes, tick 2024-05-01T10:10:00Z, eta 0s\n$`).MatchString(lines.String()) {
		t.Fatalf("progress lines:\n%s", lines.String())
	}
	if _, err := e.cmd(e.ctx, &bar, append([]string{"replay", "--progress", "bar"}, e.window()...)...); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\r\[#{10}\.{20}\] 1/3 ticks  \d+ leaves/s  ETA \S+.*\r\[#{30}\] 3/3 ticks  \d+ leaves/s  ETA 0s *\n$`).MatchString(bar.String()) {
		t.Fatalf("progress bar: %q", bar.String())
	}
	if isTerminal(&bar) {
		t.Fatal("a buffer is no terminal")
	}
	var auto strings.Builder // --progress auto: lines, stderr being no terminal
	if _, err := e.cmd(e.ctx, &auto, append([]string{"replay"}, e.window()...)...); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(auto.String(), "replay: 1/3 ticks") || !strings.HasSuffix(auto.String(), "eta 0s\n") {
		t.Fatalf("progress auto: %q", auto.String())
	}
}

// TestProgressRate checks the pacing of progress lines and bar redraws with a fake clock.
func TestProgressRate(t *testing.T) {
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		mode  string
		at    []time.Duration // clock at each of 5 ticks
		lines int
	}{
		{"lines", []time.Duration{0, 300 * time.Millisecond, 1100 * time.Millisecond, 1500 * time.Millisecond, 1600 * time.Millisecond}, 3},
		{"lines", []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second}, 5},
		{"bar", []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond, 160 * time.Millisecond, 170 * time.Millisecond}, 3},
		{"none", []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second, 8 * time.Second}, 0},
	} {
		var b strings.Builder
		now := t0
		p := newProgress(&b, tc.mode, func() time.Time { return now })
		for i, d := range tc.at {
			now = t0.Add(d)
			p.update(recompute.ReplayProgress{Tick: t0.Add(time.Duration(i) * tree.DefaultTick), Done: i + 1, Total: len(tc.at),
				Stats: recompute.ReplayStats{Leaves: int64(1000 * (i + 1))}})
		}
		p.finish()
		got := strings.Count(b.String(), "\n")
		if tc.mode == "bar" {
			got = strings.Count(b.String(), "\r")
		}
		if got != tc.lines {
			t.Errorf("%s %v: %d prints, want %d:\n%q", tc.mode, tc.at, got, tc.lines, b.String())
		}
		if tc.mode == "lines" && tc.lines == 5 && !strings.Contains(b.String(), "replay: 1/5 ticks, 1000 leaves, - leaves/s") {
			t.Errorf("first line: %q", b.String())
		}
		if tc.mode == "lines" && tc.lines == 5 && !strings.HasSuffix(b.String(), "replay: 5/5 ticks, 5000 leaves, 625 leaves/s, 0 parent writes, tick 2024-05-01T00:20:00Z, eta 0s\n") {
			t.Errorf("last line: %q", b.String())
		}
	}
}

// TestReplayTiersOnly: a wrong hourly summary and a missing daily one make verify fail with
// kind summary and name `rollup replay --tiers-only` as the repair; that command rebuilds
// them (and only them: no parent write), after which verify passes.
func TestReplayTiersOnly(t *testing.T) {
	e := newOpsEnv(t, 2, 2, 3, 3)
	if out := e.replay("--progress", "none"); !strings.Contains(out, "summaries: ") {
		t.Fatalf("replay output:\n%s", out)
	}
	e.mustVerify()
	root := e.tr.Root()
	hour := store.BucketStart(store.Tier1h, opsT0)
	day := store.BucketStart(store.Tier1d, opsT0)
	if _, err := e.db.Collection(store.HourlyCollection).UpdateOne(e.ctx, store.KeyFilter(store.Key{ID: root.ID, Type: root.Type, Tick: hour}),
		bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldSum, Value: int64(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Collection(store.DailyCollection).DeleteOne(e.ctx, store.KeyFilter(store.Key{ID: root.ID, Type: root.Type, Tick: day})); err != nil {
		t.Fatal(err)
	}
	out, code := e.verify()
	if code != 1 {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	wantAll(t, "verify", out, "2 violations (summary 2)",
		fmt.Sprintf("summary   %s (project) at %s: sum stored 1, expected", root.ID, hour.Format(time.RFC3339)),
		fmt.Sprintf("summary   %s (project) at %s: 1d summary missing (3 ticks summarized by its sources)", root.ID, day.Format(time.RFC3339)),
		"rollup replay --tiers-only --project ops --from 2024-05-01T10:00:00Z --to 2024-05-01T10:15:00Z")
	out = e.replay("--tiers-only", "--progress", "none")
	wantAll(t, "replay --tiers-only", out, "0 ticks, 0 leaves, 0 parent writes", "2 writes")
	e.mustVerify()
	if _, err := e.cmd(e.ctx, nil, append([]string{"replay", "--tiers-only", "--dry-run"}, e.window()...)...); exitCode(io.Discard, err) != 2 {
		t.Fatalf("--tiers-only --dry-run: %v, want a usage error", err)
	}
}

// TestReplayResumeCommand: after an interruption the printed command resumes after the last
// tick finished, or from that tick when the next one starts an hour (so the resumed replay
// rebuilds that hour's and day's summaries, which the interrupted one may not have written);
// --tiers-only resumes from the window's start.
func TestReplayResumeCommand(t *testing.T) {
	w := windowFlags{project: "ops", from: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC), to: time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		last  time.Time
		tiers bool
		want  string
	}{
		{time.Time{}, false, "resume: rollup replay --project ops --from 2024-05-01T10:00:00Z --to 2024-05-01T13:00:00Z"},
		{time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC), false, "resume: rollup replay --project ops --from 2024-05-01T10:10:00Z --to 2024-05-01T13:00:00Z"},
		{time.Date(2024, 5, 1, 10, 55, 0, 0, time.UTC), false, "resume: rollup replay --project ops --from 2024-05-01T10:55:00Z --to 2024-05-01T13:00:00Z"},
		{time.Date(2024, 5, 1, 10, 55, 0, 0, time.UTC), true, "resume: rollup replay --tiers-only --project ops --from 2024-05-01T10:00:00Z --to 2024-05-01T13:00:00Z"},
	} {
		var b strings.Builder
		err := replaySummary(&b, replayConfig{window: w, tiers: tc.tiers}, recompute.ReplayStats{LastTick: tc.last}, time.Second, context.Canceled)
		if !errors.Is(err, context.Canceled) || !strings.Contains(b.String(), tc.want+"\n") {
			t.Errorf("last tick %s, tiers-only %v: %v\n%s\nwant %q", tc.last, tc.tiers, err, b.String(), tc.want)
		}
	}
}
