package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
)

// The baselines benchmark (`rollup-bench baselines`) runs three designs of "keep every parent
// total equal to the sum of its leaves" on one store, each on its own database and behind its
// own black-pipe proxy (so every design's store traffic is counted apart), fed tick by tick by
// the same simulated agents:
//
//   - original: one upsert per leaf (no unique index) plus an $inc of the leaf's delta
//     (computed from the value read before) on every ancestor, in unordered bulks; a failed
//     batch is retried whole, re-reading the previous values.
//   - reaggregate: leaves upserted in unordered bulks on the unique key; once a tick's leaves
//     are all in, one $group aggregation over the tick's leaves per level, and the parent
//     documents written with absolute values.
//   - rollup: bulk.Writer and the real watcher, configured as serve runs them.

const (
	baselineProject  = "bench"
	baselineSeed     = 7
	baselineIdleGap  = 20 * time.Millisecond // as bulk.Writer's default IdleGap
	baselineAttempts = 3                     // tries of one batch in the baseline designs
	// baselineSettleWait bounds the wait for a baseline's root to be correct after its tick
	// (nothing runs in the background there: the root is final once the tick is written).
	baselineSettleWait = 2 * time.Second
	// rollupSettleWait bounds the wait for the watcher to make the root correct.
	rollupSettleWait = 60 * time.Second
)

// Names of the three designs, in the order they run and print.
const (
	designOriginal    = "original"
	designReaggregate = "reaggregate"
	designRollup      = "rollup"
)

// BaselinesConfig is the shape of the baselines benchmark.
type BaselinesConfig struct {
	Groups, Servers, Processes int // the tree: servers in all, split evenly over the groups
	Agents, Ticks, Batch       int // Batch: ops per bulk of the reaggregate design, leaves per batch of both baselines
	OriginalBatch              int // ops per bulk of the original design
	Faults                     bool
	URI                        string // run against this MongoDB instead of an embedded server
}

// baselineTick is one design's measurements of one tick.
type baselineTick struct {
	leaves   int
	ingest   time.Duration // first submission → last leaf acknowledged
	fresh    time.Duration // last leaf acknowledged → root correct (valid when freshOK)
	freshOK  bool
	stats    blackpipe.Stats // the design's store traffic from the tick's start until its root was correct
	writeOps int64           // documents written (ops sent, including retries)
	faulted  bool            // the armed fault fired during the tick
	check    totalsCheck
}

// totalsCheck compares every parent document of a tick with the sum of its leaves.
type totalsCheck struct {
	correct    bool
	rootWant   int64
	rootGot    int64
	wrong      int // parents whose value differs (or that are missing)
	duplicates int // parents stored more than once
}

func (c totalsCheck) String() string {
	if c.correct {
		return "yes"
	}
	s := fmt.Sprintf("NO: root %+d, %d parents wrong", c.rootGot-c.rootWant, c.wrong)
	if c.duplicates > 0 {
		s += fmt.Sprintf(", %d duplicated", c.duplicates)
	}
	return s
}

type baselineResult struct {
	design string
	ticks  []baselineTick
}

// Baselines runs the three designs for cfg.Ticks ticks on a fresh embedded server with test
// commands (or cfg.URI), printing a line per design and tick on progress (nil: none).
func Baselines(ctx context.Context, cfg BaselinesConfig, progress io.Writer) (BaselinesResult, error) {
	uri, stop, err := baselinesStore(ctx, cfg.URI)
	if err != nil {
		return BaselinesResult{cfg: cfg}, err
	}
	defer stop()
	res, err := benchBaselines(ctx, uri, cfg, progress)
	return BaselinesResult{cfg: cfg, designs: res}, err
}

// BaselinesResult is the baselines benchmark's measurement, per design and tick.
type BaselinesResult struct {
	cfg     BaselinesConfig
	designs []baselineResult
}

// Print writes the result as the command prints it.
func (r BaselinesResult) Print(w io.Writer) { printBaselines(w, r.cfg, r.designs) }

// Validate checks the shape.
func (c BaselinesConfig) Validate() error {
	switch {
	case c.Groups < 1 || c.Servers < 1 || c.Processes < 1:
		return errors.New("--groups, --servers and --processes must be positive")
	case c.Servers%c.Groups != 0:
		return fmt.Errorf("--servers (%d) must be a multiple of --groups (%d)", c.Servers, c.Groups)
	case c.Agents < 1 || c.Ticks < 1 || c.Batch < 1 || c.OriginalBatch < 1:
		return errors.New("--agents, --ticks, --batch and --original-batch must be positive")
	}
	return nil
}

// baselinesStore returns uri, or starts an embedded server in memory with test commands
// enabled (for the fail points) and returns its URI and the function that stops it.
func baselinesStore(ctx context.Context, uri string) (string, func(), error) {
	if uri != "" {
		return uri, func() {}, nil
	}
	return startEmbedded(ctx, embedded.Config{Listen: "127.0.0.1:0", EnableTestCommands: true, Logger: zap.NewNop()})
}

// baselineLeaf is one leaf of the benchmark tree with its ancestors, parent first.
type baselineLeaf struct {
	idx       int
	id, typ   string
	ancestors []tree.Node
}

// leafValue is one leaf count of a tick.
type leafValue struct {
	leaf    *baselineLeaf
	online  int64
	version int64
}

// baselineShape is the benchmark tree and the agents' units of work.
type baselineShape struct {
	tree   *tree.Tree
	nodes  []tree.Node
	leaves []baselineLeaf
	units  [][]int // indices into leaves: the children of one parent, submitted together
}

func newBaselineShape(cfg BaselinesConfig) (*baselineShape, error) {
	nodes := tree.Generate(baselineProject, cfg.Groups, cfg.Servers/cfg.Groups, cfg.Processes)
	t, err := tree.Build(baselineProject, nodes)
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	s := &baselineShape{tree: t, nodes: nodes}
	unitOf := map[string]int{}
	for i, n := range t.Leaves() {
		s.leaves = append(s.leaves, baselineLeaf{idx: i, id: n.ID, typ: n.Type, ancestors: t.Ancestors(n.ID)})
		u, ok := unitOf[n.Parent]
		if !ok {
			u = len(s.units)
			unitOf[n.Parent] = u
			s.units = append(s.units, nil)
		}
		s.units[u] = append(s.units[u], i)
	}
	return s, nil
}

// values returns the tick's count of every leaf (deterministic) and each parent's expected
// total.
func (s *baselineShape) values(tick time.Time) ([]leafValue, map[string]int64) {
	observed := tick.Add(tree.DefaultTick - time.Second)
	vals := make([]leafValue, len(s.leaves))
	want := map[string]int64{}
	for i := range s.leaves {
		l := &s.leaves[i]
		vals[i] = leafValue{leaf: l, online: agentsim.Online(baselineSeed, i, observed), version: observed.UnixNano()}
		for _, a := range l.ancestors {
			want[a.ID] += vals[i].online
		}
	}
	return vals, want
}

// baselineDesign is one design under test.
type baselineDesign interface {
	// submit writes one agent's leaves of a tick and returns once they are acknowledged.
	submit(ctx context.Context, tick time.Time, leaves []leafValue) error
	// settle runs what the design does once all of a tick's leaves are in.
	settle(ctx context.Context, tick time.Time) error
	// writeOps is the number of documents written so far (ops sent).
	writeOps() int64
}

// designRun is a design with its database and proxy.
type designRun struct {
	name    string
	appName string // the client whose update the --faults fail point targets
	proxy   *blackpipe.Proxy
	db      string
	impl    baselineDesign
	maxWait time.Duration
	// connErrors counts the design's connections closed by an error (the fault firing).
	connErrors atomic.Int64
}

// baselineRig holds what the designs of a baselines run share: the store (target), a
// counting proxy per design, the clients, and the pools their components and proxies run
// under. close stops them in order.
type baselineRig struct {
	ctx    context.Context
	target string
	log    *zap.Logger
	// proxies outlive the components and clients that use them: clients disconnect through
	// them.
	proxies     *pool.ContextPool
	stopProxies context.CancelFunc
	// p runs the designs' components; one failing stops them all.
	p       *pool.ContextPool
	stopAll context.CancelFunc
	clients []*mongo.Client
	runs    []*designRun
	// direct is the harness's own client (fail points, freshness polls, checks), straight to
	// the store, so that only the designs' own traffic is counted.
	direct *mongo.Client
}

// newBaselineRig returns a rig for the store at target with its harness client connected;
// the caller closes it (also after an error).
func newBaselineRig(ctx context.Context, target string, log *zap.Logger) (*baselineRig, error) {
	g := &baselineRig{ctx: ctx, target: target, log: log}
	proxyCtx, stopProxies := context.WithCancel(ctx)
	g.proxies, g.stopProxies = pool.New().WithContext(proxyCtx), stopProxies
	pctx, stopAll := context.WithCancel(ctx)
	g.p, g.stopAll = pool.New().WithContext(pctx).WithCancelOnError(), stopAll
	var err error
	g.direct, err = g.connect(nil, "bench-harness", true)
	return g, err
}

// close stops in order: the components, then drops the designs' databases, disconnects the
// clients and stops the proxies.
func (g *baselineRig) close() {
	g.stopAll()
	_ = g.p.Wait()
	for _, r := range g.runs {
		if g.direct != nil {
			_ = g.direct.Database(r.db).Drop(context.Background())
		}
	}
	for _, c := range g.clients {
		_ = c.Disconnect(context.Background())
	}
	g.stopProxies()
	_ = g.proxies.Wait()
}

// connect opens a client to the store through run's proxy (or directly when run is nil),
// counting run's connections closed by an error.
func (g *baselineRig) connect(run *designRun, appName string, retryWrites bool) (*mongo.Client, error) {
	opts := options.Client().SetAppName(appName).SetRetryWrites(retryWrites).SetServerSelectionTimeout(10 * time.Second)
	addr := g.target
	if run != nil {
		addr = run.proxy.Addr()
		opts.SetPoolMonitor(&event.PoolMonitor{Event: func(e *event.PoolEvent) {
			if e.Type == event.ConnectionClosed && (e.Reason == event.ReasonConnectionErrored || e.Reason == event.ReasonError) {
				run.connErrors.Add(1)
			}
		}})
	}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://"+addr+"/?directConnection=true"), opts)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	g.clients = append(g.clients, c)
	return c, nil
}

// addDesign starts the design name behind a proxy of its own, on its own database (named
// with stamp), with its components running, and adds it to the rig's runs.
func (g *baselineRig) addDesign(name string, stamp int64, shape *baselineShape, cfg BaselinesConfig) error {
	proxy := blackpipe.New(g.target, g.log)
	if err := proxy.Listen("127.0.0.1:0"); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	g.proxies.Go(proxy.Run)
	r := &designRun{name: name, proxy: proxy, db: fmt.Sprintf("bench_%s_%d", name, stamp), maxWait: baselineSettleWait}
	g.runs = append(g.runs, r)
	wc := options.Database().SetWriteConcern(store.DurableWriteConcern())
	switch name {
	case designOriginal:
		// The baselines retry a failed batch themselves, so the driver's retry is off.
		// Leaf upserts go through a second client only so that the fault can target them.
		c, err := g.connect(r, "bench-original", false)
		if err != nil {
			return err
		}
		cl, err := g.connect(r, "bench-original-leaves", false)
		if err != nil {
			return err
		}
		r.appName = "bench-original-leaves"
		d, err := newOriginalDesign(g.ctx, c.Database(r.db, wc), cl.Database(r.db, wc), cfg.Batch, cfg.OriginalBatch)
		if err != nil {
			return err
		}
		g.p.Go(d.batcher.run)
		r.impl = d
	case designReaggregate:
		c, err := g.connect(r, "bench-reaggregate", false)
		if err != nil {
			return err
		}
		r.appName = "bench-reaggregate"
		d, err := newReaggregateDesign(g.ctx, c.Database(r.db, wc), shape, cfg.Batch)
		if err != nil {
			return err
		}
		g.p.Go(d.batcher.run)
		r.impl = d
	case designRollup:
		c, err := g.connect(r, "bench-rollup", true)
		if err != nil {
			return err
		}
		r.appName = "bench-rollup"
		r.maxWait = rollupSettleWait
		d, err := newRollupDesign(g.ctx, c.Database(r.db, wc), shape, time.Now().Add(-365*24*time.Hour), g.log)
		if err != nil {
			return err
		}
		g.p.Go(d.writer.Run)
		g.p.Go(d.watcher.Run)
		r.impl = d
	}
	return nil
}

// benchBaselines runs every design (the original, the re-aggregation, rollup) on the store at
// uri, tick after tick on the same leaves, and returns each design's ticks.
func benchBaselines(ctx context.Context, uri string, cfg BaselinesConfig, progress io.Writer) ([]baselineResult, error) {
	shape, err := newBaselineShape(cfg)
	if err != nil {
		return nil, err
	}
	target, err := hostOf(uri)
	if err != nil {
		return nil, err
	}
	g, err := newBaselineRig(ctx, target, zap.NewNop())
	defer g.close()
	if err != nil {
		return nil, err
	}
	stamp := time.Now().UnixNano()
	for _, name := range []string{designOriginal, designReaggregate, designRollup} {
		if err := g.addDesign(name, stamp, shape, cfg); err != nil {
			return nil, err
		}
	}

	now := time.Now().UTC()
	first := tree.AlignTick(now, tree.DefaultTick).Add(-time.Duration(cfg.Ticks) * tree.DefaultTick)
	out := make([]baselineResult, len(g.runs))
	for i, r := range g.runs {
		out[i].design = r.name
	}
	for ti := range cfg.Ticks {
		tick := first.Add(time.Duration(ti) * tree.DefaultTick)
		vals, want := shape.values(tick)
		for i, r := range g.runs {
			t, err := runDesignTick(ctx, g.direct, r, shape, cfg, tick, vals, want)
			if err != nil {
				return nil, fmt.Errorf("%s tick %d: %w", r.name, ti+1, err)
			}
			out[i].ticks = append(out[i].ticks, t)
			if progress != nil {
				_, _ = fmt.Fprintf(progress, "tick %d %-12s ingest %v, root correct after %s, %d commands, totals correct: %s\n",
					ti+1, r.name, t.ingest.Round(time.Millisecond), freshString(t), commandCount(t.stats), t.check)
			}
		}
	}
	return out, nil
}

// runDesignTick feeds one tick to one design and measures it.
func runDesignTick(ctx context.Context, direct *mongo.Client, r *designRun, shape *baselineShape, cfg BaselinesConfig,
	tick time.Time, vals []leafValue, want map[string]int64,
) (baselineTick, error) {
	t := baselineTick{leaves: len(vals)}
	if cfg.Faults {
		if err := armLeafFault(ctx, direct, r.appName); err != nil {
			return t, err
		}
	}
	opsBefore, errorsBefore := r.impl.writeOps(), r.connErrors.Load()
	r.proxy.ResetStats()
	start := time.Now()
	agents := pool.New().WithErrors().WithContext(ctx).WithMaxGoroutines(cfg.Agents)
	for _, unit := range shape.units {
		agents.Go(func(ctx context.Context) error {
			batch := make([]leafValue, len(unit))
			for j, li := range unit {
				batch[j] = vals[li]
			}
			return r.impl.submit(ctx, tick, batch)
		})
	}
	if err := agents.Wait(); err != nil {
		return t, fmt.Errorf("submit: %w", err)
	}
	acked := time.Now()
	t.ingest = acked.Sub(start)
	if err := r.impl.settle(ctx, tick); err != nil {
		return t, fmt.Errorf("settle: %w", err)
	}
	counts := direct.Database(r.db).Collection(store.CountsCollection)
	root := shape.tree.Root()
	deadline := acked.Add(r.maxWait)
	for {
		got, err := baselineRootValue(ctx, counts, root, tick)
		if err != nil {
			return t, err
		}
		if got == want[root.ID] {
			t.fresh, t.freshOK = time.Since(acked), true
			break
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	t.stats = r.proxy.Stats()
	t.writeOps = r.impl.writeOps() - opsBefore
	if cfg.Faults {
		if err := disarmFault(ctx, direct); err != nil {
			return t, err
		}
		t.faulted = r.connErrors.Load() > errorsBefore
	}
	check, err := checkBaselineTotals(ctx, counts, shape, tick, want)
	if err != nil {
		return t, err
	}
	t.check = check
	return t, nil
}

// armLeafFault makes the next update command of appName's client fail by closing its
// connection before the server runs it.
func armLeafFault(ctx context.Context, c *mongo.Client, appName string) error {
	err := c.Database("admin").RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"update"}},
			{Key: "closeConnection", Value: true},
			{Key: "appName", Value: appName},
		}},
	}).Err()
	if err != nil {
		return fmt.Errorf("configure fail point: %w", err)
	}
	return nil
}

// disarmFault switches the fail point off (it is gone already if it fired).
func disarmFault(ctx context.Context, c *mongo.Client) error {
	err := c.Database("admin").RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"},
	}).Err()
	if err != nil {
		return fmt.Errorf("disable fail point: %w", err)
	}
	return nil
}

// baselineRootValue reads the root's total the way a dashboard would (one document), -1 if absent.
func baselineRootValue(ctx context.Context, counts *mongo.Collection, root tree.Node, tick time.Time) (int64, error) {
	raw, err := counts.FindOne(ctx, bson.D{
		{Key: store.FieldID, Value: root.ID}, {Key: store.FieldType, Value: root.Type},
		{Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(tick)},
	}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read root: %w", err)
	}
	v, ok := raw.Lookup(store.FieldOnline).AsInt64OK()
	if !ok {
		return -1, nil
	}
	return v, nil
}

// checkBaselineTotals reads every parent document of the tick and compares it with want.
func checkBaselineTotals(ctx context.Context, counts *mongo.Collection, shape *baselineShape, tick time.Time, want map[string]int64) (totalsCheck, error) {
	var types []string
	for _, n := range shape.nodes {
		if !shape.tree.IsLeaf(n.ID) && !slices.Contains(types, n.Type) {
			types = append(types, n.Type)
		}
	}
	cur, err := counts.Find(ctx, bson.D{
		{Key: store.FieldTimestamp, Value: bson.NewDateTimeFromTime(tick)},
		{Key: store.FieldType, Value: bson.D{{Key: "$in", Value: types}}},
	}, options.Find().SetProjection(bson.D{{Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1}, {Key: store.FieldOnline, Value: 1}}))
	if err != nil {
		return totalsCheck{}, fmt.Errorf("read parents: %w", err)
	}
	got := map[string][]int64{}
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup(store.FieldID).StringValueOK()
		typ, _ := cur.Current.Lookup(store.FieldType).StringValueOK()
		if n, ok := shape.tree.Node(id); !ok || n.Type != typ {
			continue
		}
		v, _ := cur.Current.Lookup(store.FieldOnline).AsInt64OK()
		got[id] = append(got[id], v)
	}
	if err := cur.Err(); err != nil {
		return totalsCheck{}, fmt.Errorf("read parents: %w", err)
	}
	_ = cur.Close(ctx)
	root := shape.tree.Root().ID
	c := totalsCheck{rootWant: want[root], rootGot: sumInt64(got[root])}
	for id, w := range want {
		vs := got[id]
		if len(vs) > 1 {
			c.duplicates++
		}
		if len(vs) != 1 || vs[0] != w {
			c.wrong++
		}
	}
	c.correct = c.wrong == 0
	return c, nil
}

func sumInt64(vs []int64) int64 {
	var s int64
	for _, v := range vs {
		s += v
	}
	return s
}

// leafBatcher coalesces concurrent submissions into batches of at most max leaves (whole
// submissions, one tick per batch) and writes up to workers batches at once: a batch goes
// when it is full, or when no submission arrived for idleGap — the policy a fair
// implementation of a baseline would use.
type leafBatcher struct {
	in      chan batchReq
	max     int
	workers int
	idleGap time.Duration
	write   func(ctx context.Context, tick time.Time, leaves []leafValue) error
}

type batchReq struct {
	tick   time.Time
	leaves []leafValue
	done   chan error
}

func newLeafBatcher(maxLeaves int, write func(context.Context, time.Time, []leafValue) error) *leafBatcher {
	return &leafBatcher{in: make(chan batchReq), max: maxLeaves, workers: bulk.DefaultWorkers(), idleGap: baselineIdleGap, write: write}
}

// submit hands leaves to the batcher and waits for their batch to be written.
func (b *leafBatcher) submit(ctx context.Context, tick time.Time, leaves []leafValue) error {
	r := batchReq{tick: tick, leaves: leaves, done: make(chan error, 1)}
	select {
	case b.in <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run cuts and writes batches until ctx is done.
func (b *leafBatcher) run(ctx context.Context) error {
	writers := pool.New().WithMaxGoroutines(b.workers) // Go blocks while all workers are busy
	defer writers.Wait()
	var pending []batchReq
	n := 0
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	flush := func() {
		reqs := pending
		pending, n = nil, 0
		writers.Go(func() {
			var leaves []leafValue
			for _, r := range reqs {
				leaves = append(leaves, r.leaves...)
			}
			err := b.write(ctx, reqs[0].tick, leaves)
			for _, r := range reqs {
				r.done <- err
			}
		})
	}
	for {
		var idleC <-chan time.Time
		if len(pending) > 0 {
			idleC = idle.C
		}
		select {
		case <-ctx.Done():
			for _, r := range pending {
				r.done <- ctx.Err()
			}
			return nil
		case r := <-b.in:
			if len(pending) > 0 && (n+len(r.leaves) > b.max || !r.tick.Equal(pending[0].tick)) {
				flush()
			}
			pending = append(pending, r)
			n += len(r.leaves)
			if n >= b.max {
				flush()
			} else {
				idle.Reset(b.idleGap)
			}
		case <-idleC:
			flush()
		}
	}
}

// retryBaselineBatch runs write up to baselineAttempts times while it fails (the baselines' policy:
// a failed batch is redone whole).
func retryBaselineBatch(ctx context.Context, write func() error) error {
	var err error
	for range baselineAttempts {
		if err = write(); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// baselineBulkWrite sends models in unordered bulks of at most batch ops.
func baselineBulkWrite(ctx context.Context, coll *mongo.Collection, models []mongo.WriteModel, batch int, ops *atomic.Int64) error {
	for lo := 0; lo < len(models); lo += batch {
		hi := min(lo+batch, len(models))
		ops.Add(int64(hi - lo))
		if _, err := coll.BulkWrite(ctx, models[lo:hi], options.BulkWrite().SetOrdered(false)); err != nil {
			return fmt.Errorf("bulk write: %w", err)
		}
	}
	return nil
}

func leafKeyFilter(id, typ string, ts bson.DateTime) bson.D {
	return bson.D{{Key: store.FieldID, Value: id}, {Key: store.FieldType, Value: typ}, {Key: store.FieldTimestamp, Value: ts}}
}

func baselineKeyIndex(unique bool) mongo.IndexModel {
	return mongo.IndexModel{
		Keys:    bson.D{{Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1}, {Key: store.FieldTimestamp, Value: 1}},
		Options: options.Index().SetUnique(unique),
	}
}

// originalDesign is the system rollup replaces: per leaf, the previous value is read, the
// leaf upserted with its new value, and every ancestor document upserted with an $inc of the
// difference. There is no unique index (a plain one on the key keeps it fast). A batch sends
// the ancestors' $incs first, then the leaves' upserts (leaves first has the mirror failure:
// a retry re-reads the new leaf values and loses the deltas), and a failed batch is redone
// whole: after a failure between the two, the $incs are applied twice.
type originalDesign struct {
	counts, leafCounts *mongo.Collection // the same collection; leafCounts through its own client
	batch              int
	ops                atomic.Int64
	batcher            *leafBatcher
}

// newOriginalDesign batches up to leaves leaves and sends them in bulks of ops writes.
func newOriginalDesign(ctx context.Context, db, leafDB *mongo.Database, leaves, ops int) (*originalDesign, error) {
	d := &originalDesign{counts: db.Collection(store.CountsCollection), leafCounts: leafDB.Collection(store.CountsCollection), batch: ops}
	if _, err := d.counts.Indexes().CreateOne(ctx, baselineKeyIndex(false)); err != nil {
		return nil, fmt.Errorf("original: create index: %w", err)
	}
	d.batcher = newLeafBatcher(leaves, d.write)
	return d, nil
}

func (d *originalDesign) submit(ctx context.Context, tick time.Time, leaves []leafValue) error {
	return d.batcher.submit(ctx, tick, leaves)
}

func (d *originalDesign) settle(context.Context, time.Time) error { return nil }

func (d *originalDesign) writeOps() int64 { return d.ops.Load() }

func (d *originalDesign) write(ctx context.Context, tick time.Time, leaves []leafValue) error {
	return retryBaselineBatch(ctx, func() error { return d.writeOnce(ctx, tick, leaves) })
}

func (d *originalDesign) writeOnce(ctx context.Context, tick time.Time, leaves []leafValue) error {
	ts := bson.NewDateTimeFromTime(tick)
	ids := make(bson.A, len(leaves))
	for i, l := range leaves {
		ids[i] = l.leaf.id
	}
	cur, err := d.counts.Find(ctx, bson.D{{Key: store.FieldID, Value: bson.D{{Key: "$in", Value: ids}}}, {Key: store.FieldTimestamp, Value: ts}},
		options.Find().SetBatchSize(int32(len(leaves))).
			SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1}, {Key: store.FieldOnline, Value: 1}}))
	if err != nil {
		return fmt.Errorf("read previous: %w", err)
	}
	prev := map[[2]string]int64{}
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup(store.FieldID).StringValueOK()
		typ, _ := cur.Current.Lookup(store.FieldType).StringValueOK()
		v, _ := cur.Current.Lookup(store.FieldOnline).AsInt64OK()
		prev[[2]string{id, typ}] = v
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read previous: %w", err)
	}
	_ = cur.Close(ctx)
	var incs, sets []mongo.WriteModel
	for _, l := range leaves {
		delta := l.online - prev[[2]string{l.leaf.id, l.leaf.typ}]
		for _, a := range l.leaf.ancestors {
			incs = append(incs, mongo.NewUpdateOneModel().SetFilter(leafKeyFilter(a.ID, a.Type, ts)).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: store.FieldOnline, Value: delta}}}}).SetUpsert(true))
		}
		sets = append(sets, mongo.NewUpdateOneModel().SetFilter(leafKeyFilter(l.leaf.id, l.leaf.typ, ts)).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: l.online}, {Key: store.FieldVersion, Value: l.version}}}}).
			SetUpsert(true))
	}
	if err := baselineBulkWrite(ctx, d.counts, incs, d.batch, &d.ops); err != nil {
		return fmt.Errorf("ancestors: %w", err)
	}
	if err := baselineBulkWrite(ctx, d.leafCounts, sets, d.batch, &d.ops); err != nil {
		return fmt.Errorf("leaves: %w", err)
	}
	return nil
}

// reaggregateDesign stores leaves idempotently on the unique key, each with its ancestors'
// ids (up1 = parent, up2 = grandparent...), and once a tick's leaves are all in recomputes
// every parent with one $group per level over the tick's leaves and writes the parents'
// absolute totals, deepest level first, the root last.
type reaggregateDesign struct {
	counts    *mongo.Collection
	batch     int
	height    int // ancestors of a leaf
	leafTypes bson.A
	tree      *tree.Tree
	ops       atomic.Int64
	batcher   *leafBatcher
}

func newReaggregateDesign(ctx context.Context, db *mongo.Database, shape *baselineShape, batch int) (*reaggregateDesign, error) {
	d := &reaggregateDesign{counts: db.Collection(store.CountsCollection), batch: batch, tree: shape.tree}
	for _, l := range shape.leaves {
		d.height = max(d.height, len(l.ancestors))
		if !slices.Contains(d.leafTypes, any(l.typ)) {
			d.leafTypes = append(d.leafTypes, l.typ)
		}
	}
	_, err := d.counts.Indexes().CreateMany(ctx, []mongo.IndexModel{
		baselineKeyIndex(true),
		{Keys: bson.D{{Key: store.FieldTimestamp, Value: 1}, {Key: store.FieldType, Value: 1}}},
	})
	if err != nil {
		return nil, fmt.Errorf("reaggregate: create indexes: %w", err)
	}
	d.batcher = newLeafBatcher(batch, d.write)
	return d, nil
}

func (d *reaggregateDesign) submit(ctx context.Context, tick time.Time, leaves []leafValue) error {
	return d.batcher.submit(ctx, tick, leaves)
}

func (d *reaggregateDesign) writeOps() int64 { return d.ops.Load() }

func upField(k int) string { return fmt.Sprintf("up%d", k) }

func (d *reaggregateDesign) write(ctx context.Context, tick time.Time, leaves []leafValue) error {
	ts := bson.NewDateTimeFromTime(tick)
	models := make([]mongo.WriteModel, len(leaves))
	for i, l := range leaves {
		set := bson.D{{Key: store.FieldOnline, Value: l.online}, {Key: store.FieldVersion, Value: l.version}}
		for k, a := range l.leaf.ancestors {
			set = append(set, bson.E{Key: upField(k + 1), Value: a.ID})
		}
		models[i] = mongo.NewUpdateOneModel().SetFilter(leafKeyFilter(l.leaf.id, l.leaf.typ, ts)).
			SetUpdate(bson.D{{Key: "$set", Value: set}}).SetUpsert(true)
	}
	return retryBaselineBatch(ctx, func() error { return baselineBulkWrite(ctx, d.counts, models, d.batch, &d.ops) })
}

func (d *reaggregateDesign) settle(ctx context.Context, tick time.Time) error {
	ts := bson.NewDateTimeFromTime(tick)
	var models []mongo.WriteModel
	for k := 1; k <= d.height; k++ {
		cur, err := d.counts.Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: store.FieldTimestamp, Value: ts}, {Key: store.FieldType, Value: bson.D{{Key: "$in", Value: d.leafTypes}}}}}},
			{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$" + upField(k)}, {Key: store.FieldOnline, Value: bson.D{{Key: "$sum", Value: "$" + store.FieldOnline}}}}}},
		}, options.Aggregate().SetBatchSize(10_000))
		if err != nil {
			return fmt.Errorf("aggregate level %d: %w", k, err)
		}
		for cur.Next(ctx) {
			id, ok := cur.Current.Lookup("_id").StringValueOK()
			if !ok {
				continue // leaves with fewer ancestors
			}
			n, ok := d.tree.Node(id)
			if !ok {
				continue
			}
			v, _ := cur.Current.Lookup(store.FieldOnline).AsInt64OK()
			models = append(models, mongo.NewUpdateOneModel().SetFilter(leafKeyFilter(n.ID, n.Type, ts)).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: v}}}}).SetUpsert(true))
		}
		if err := cur.Err(); err != nil {
			return fmt.Errorf("aggregate level %d: %w", k, err)
		}
		_ = cur.Close(ctx)
	}
	return retryBaselineBatch(ctx, func() error { return baselineBulkWrite(ctx, d.counts, models, d.batch, &d.ops) })
}

// rollupDesign is rollup itself: bulk.Writer for the leaves and the watcher for the parents,
// on a database migrated as serve migrates it, with the tree stored in tree/treedb.
type rollupDesign struct {
	writer  *bulk.Writer
	watcher *watcher.Watcher
	leaves  atomic.Int64
}

func newRollupDesign(ctx context.Context, db *mongo.Database, shape *baselineShape, effective time.Time, log *zap.Logger) (*rollupDesign, error) {
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		return nil, fmt.Errorf("rollup: migrate: %w", err)
	}
	trees := treedb.New(db)
	if _, err := trees.Import(ctx, baselineProject, shape.nodes, tree.AlignTick(effective, tree.DefaultTick)); err != nil {
		return nil, fmt.Errorf("rollup: import tree: %w", err)
	}
	return &rollupDesign{
		writer:  bulk.New(db.Collection(store.CountsCollection), bulk.Options{AttemptTimeout: 10 * time.Second}, log),
		watcher: watcher.New(db, treedb.NewCache(trees), watcher.Options{}, log),
	}, nil
}

func (d *rollupDesign) submit(ctx context.Context, tick time.Time, leaves []leafValue) error {
	items := make([]bulk.Item, len(leaves))
	for i, l := range leaves {
		items[i] = bulk.Item{
			Key:     bulk.Key{ID: l.leaf.id, Type: l.leaf.typ, Timestamp: tick},
			Project: baselineProject, Online: l.online, Version: l.version,
		}
	}
	d.leaves.Add(int64(len(items)))
	res, err := d.writer.Submit(ctx, items)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	for i, r := range res {
		if r.Outcome == bulk.OutcomeRejected || r.Outcome == bulk.OutcomeUnknown {
			return fmt.Errorf("leaf %s: %v: %w", items[i].ID, r.Outcome, r.Err)
		}
	}
	return nil
}

func (d *rollupDesign) settle(context.Context, time.Time) error { return nil }

func (d *rollupDesign) writeOps() int64 { return d.leaves.Load() + d.watcher.Stats().ParentWrites }

func commandCount(s blackpipe.Stats) int {
	n := 0
	for _, c := range s.Commands {
		n += c
	}
	return n
}

func freshString(t baselineTick) string {
	if !t.freshOK {
		return "never"
	}
	return fmtMillis(t.fresh)
}

func fmtMillis(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
}

// percentileOf returns the p-th percentile (nearest rank) of ds, which it sorts.
func percentileOf(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[max(0, min(len(ds)-1, i-1))]
}

// commandMix lists a tick's commands by name, most frequent first.
func commandMix(s blackpipe.Stats) string {
	names := make([]string, 0, len(s.Commands))
	for n := range s.Commands {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if s.Commands[a] != s.Commands[b] {
			return s.Commands[b] - s.Commands[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, s.Commands[n])
	}
	return strings.Join(parts, ", ")
}

func printBaselines(w io.Writer, cfg BaselinesConfig, res []baselineResult) {
	leaves := cfg.Servers * cfg.Processes
	_, _ = fmt.Fprintf(w, "tree: 1 root, %d groups, %d servers, %d leaves; %d agents; %d ticks; batches of %d leaves, bulks of %d ops (original: %d); faults: %v\n",
		cfg.Groups, cfg.Servers, leaves, cfg.Agents, cfg.Ticks, cfg.Batch, cfg.Batch, cfg.OriginalBatch, onOff(cfg.Faults))
	_, _ = fmt.Fprintln(w, "design        leaves/s  fresh p50  fresh p99  cmds/tick  MB up/down per tick  write ops/tick  totals correct")
	var cmds [3]float64
	for i, r := range res {
		var ingest time.Duration
		var fresh []time.Duration
		var nCmds, up, down, ops float64
		never, correct := 0, 0
		for _, t := range r.ticks {
			ingest += t.ingest
			if t.freshOK {
				fresh = append(fresh, t.fresh)
			} else {
				never++
			}
			nCmds += float64(commandCount(t.stats))
			up += float64(t.stats.BytesUp)
			down += float64(t.stats.BytesDown)
			ops += float64(t.writeOps)
			if t.check.correct {
				correct++
			}
		}
		n := float64(len(r.ticks))
		p50, p99 := "never", "never"
		if len(fresh) > 0 {
			p50, p99 = fmtMillis(percentileOf(fresh, 50)), fmtMillis(percentileOf(fresh, 99))
			if never > 0 {
				p99 = "never"
			}
		}
		if i < len(cmds) {
			cmds[i] = nCmds / n
		}
		_, _ = fmt.Fprintf(w, "%-12s %9.0f  %9s  %9s  %9.0f  %8.1f / %-8.1f  %14.0f  %d/%d ticks\n",
			r.design, float64(leaves)*n/ingest.Seconds(), p50, p99, nCmds/n, up/n/1e6, down/n/1e6, ops/n, correct, len(r.ticks))
	}
	_, _ = fmt.Fprintln(w, "\nper tick:")
	for _, r := range res {
		for i, t := range r.ticks {
			fault := ""
			if cfg.Faults {
				fault = fmt.Sprintf(" fault fired: %v;", t.faulted)
			}
			_, _ = fmt.Fprintf(w, "  %-12s tick %d: ingest %v, root correct after %s;%s totals correct: %s; commands: %s\n",
				r.design, i+1, t.ingest.Round(time.Millisecond), freshString(t), fault, t.check, commandMix(t.stats))
		}
	}
	if len(res) == 3 && cmds[2] > 0 {
		_, _ = fmt.Fprintf(w, "\nrollup commands per tick = 1/%.1f of original's (target <= 1/50), 1/%.1f of reaggregate's\n",
			cmds[0]/cmds[2], cmds[1]/cmds[2])
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
