package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/internal/testnet"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// serveChild is a `rollup serve` process.
type serveChild struct {
	cmd     *exec.Cmd
	apiURL  string
	api     chan string
	stopped chan struct{}
	stderr  *syncBuffer
}

// freeAddr returns a loopback address for a listener the test may stop and start again on
// it (testnet.FreeAddr).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testnet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// spawn runs `rollup args...` (this test binary, see TestMain) without waiting: each line of
// its standard output goes to onLine, its standard error to the returned buffer, and the
// returned channel is closed once it has exited. It is killed when the test ends (its stderr
// logged if the test failed).
func spawn(t *testing.T, onLine func(string), args ...string) (*exec.Cmd, *syncBuffer, chan struct{}) {
	t.Helper()
	return spawnWith(t, nil, nil, onLine, args...)
}

// spawnWith is spawn with the child run through wrap (a command and its arguments, such as
// taskset -c 0; nil: none) and with extra environment variables (KEY=VALUE).
func spawnWith(t *testing.T, wrap, extraEnv []string, onLine func(string), args ...string) (*exec.Cmd, *syncBuffer, chan struct{}) {
	t.Helper()
	raw, _ := json.Marshal(args)
	argv := append(append(slices.Clone(wrap), os.Args[0]), "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), childArgsEnv+"="+string(raw)), extraEnv...)
	stderr, exited := &syncBuffer{}, make(chan struct{})
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			onLine(sc.Text())
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			logs := stderr.String()
			t.Logf("rollup %s pid %d stderr (last 8 KiB):\n%s", args[0], cmd.Process.Pid, logs[max(0, len(logs)-8<<10):])
		}
	})
	return cmd, stderr, exited
}

// launchServe runs `rollup serve args...` without waiting.
// startMongodChild starts `rollup mongod --memory` (with extra flags) through wrap (nil:
// directly) and returns the URI it prints.
func startMongodChild(t *testing.T, wrap []string, extra ...string) string {
	t.Helper()
	lines := make(chan string, 16)
	_, stderr, exited := spawnWith(t, wrap, nil, func(line string) {
		select { // the first line is the URI; later ones are not waited for
		case lines <- line:
		default:
		}
	},
		append([]string{"mongod", "--listen", "127.0.0.1:0", "--memory", "--log-level", "warn"}, extra...)...)
	select {
	case uri := <-lines:
		return uri
	case <-exited:
		t.Fatalf("mongod exited: %s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("mongod did not print its URI within 60s")
	}
	return ""
}

func launchServe(t *testing.T, args ...string) *serveChild {
	t.Helper()
	return launchServeEnv(t, nil, args...)
}

// launchServeEnv is launchServe with extra environment variables (KEY=VALUE).
func launchServeEnv(t *testing.T, extraEnv []string, args ...string) *serveChild {
	t.Helper()
	c := &serveChild{api: make(chan string, 1)}
	c.cmd, c.stderr, c.stopped = spawnWith(t, nil, extraEnv, func(line string) {
		if url, ok := strings.CutPrefix(line, "rollup API: "); ok {
			c.api <- url
		}
	}, append([]string{"serve"}, args...)...)
	return c
}

// waitAPI waits for the child's API line.
func (c *serveChild) waitAPI(t *testing.T) {
	t.Helper()
	select {
	case c.apiURL = <-c.api:
	case <-c.stopped:
		t.Fatalf("rollup serve exited before serving: %s", c.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("rollup serve did not start within 30s")
	}
}

// waitReady waits until the child's /readyz answers 200 and returns how long that took.
func (c *serveChild) waitReady(t *testing.T) time.Duration {
	t.Helper()
	return waitUntil(t, 60*time.Second, "/readyz 200", func() bool {
		select {
		case <-c.stopped:
			t.Fatalf("rollup serve exited: %s", c.stderr.String())
		default:
		}
		code, _ := readyz(c.apiURL)
		return code == http.StatusOK
	})
}

// startServe runs `rollup serve` on an embedded store in dir and waits until it is ready.
func startServe(t *testing.T, dir, storeAddr, apiAddr string) *serveChild {
	t.Helper()
	// A short lease: the restarted process takes over from the killed one quickly.
	c := launchServe(t, "--data", dir, "--embedded-listen", storeAddr, "--listen", apiAddr, "--log-level", "warn", "--lease-ttl", "1s")
	c.waitAPI(t)
	c.waitReady(t)
	return c
}

func (c *serveChild) kill() {
	_ = c.cmd.Process.Signal(os.Kill)
	<-c.stopped
}

// TestServeSurvivesKill9 kills a `rollup serve` process (embedded store, bulk writer, watcher)
// with SIGKILL while agents submit, restarts it on the same data directory, lets the agents
// resend what was not acknowledged, and checks every (node, tick): parent == Σ children.
func TestServeSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rollup processes")
	}
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { serveKill9(t, seed) })
	}
}

func serveKill9(t *testing.T, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 9))
	dir := t.TempDir()
	storeAddr, apiAddr := freeAddr(t), freeAddr(t)
	child := startServe(t, dir, storeAddr, apiAddr)

	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + storeAddr + "/?replicaSet=rs0").SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	db := client.Database(store.DefaultDatabase)
	const project = "crash"
	nodes := tree.Generate(project, 2, 3, 5)
	tr, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ticks := []time.Time{tree.AlignTick(now, tree.DefaultTick).Add(-2 * tree.DefaultTick), tree.AlignTick(now, tree.DefaultTick).Add(-tree.DefaultTick)}
	if _, err := treedb.New(db).Import(ctx, project, nodes, ticks[0]); err != nil {
		t.Fatal(err)
	}
	token, err := api.CreateToken(ctx, db, project, "crash-test")
	if err != nil {
		t.Fatal(err)
	}
	leaves := tr.Leaves()

	// A stream of submissions; the process is killed after a random number of them. The
	// versions only grow, so the last acknowledged value of each (leaf, tick) is the truth.
	submit := func(url string, round int) error {
		c := &agentclient.Client{BaseURL: url, Token: token, MaxAttempts: 1}
		counts := make([]agentclient.Count, 0, len(leaves))
		for _, l := range leaves {
			counts = append(counts, agentclient.Count{ID: l.ID, Type: l.Type, Online: int64(rng.IntN(100))})
		}
		_, err := c.Submit(ctx, agentclient.Submission{
			Project: project, Timestamp: ticks[round%2], ObservedAt: now.Add(time.Duration(round) * time.Millisecond), Counts: counts,
		})
		return err
	}
	killAt := 2 + rng.IntN(6)
	round := 0
	for ; round < killAt; round++ {
		if err := submit(child.apiURL, round); err != nil {
			t.Fatalf("submit %d: %v", round, err)
		}
	}
	// Kill while a submission is in flight: its outcome is unknown to the agent.
	inflight := make(chan error, 1)
	go func() { inflight <- submit(child.apiURL, round) }()
	child.kill()
	<-inflight
	child = startServe(t, dir, storeAddr, apiAddr)
	// The agent resends the unacknowledged round (safe by construction), then goes on.
	for ; round < killAt+4; round++ {
		if err := submit(child.apiURL, round); err != nil {
			t.Fatalf("submit %d after restart: %v", round, err)
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		bad := checkTotals(ctx, t, db, project, nodes, ticks)
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("totals still wrong after restart: %s", bad)
		}
		time.Sleep(100 * time.Millisecond) // polling the store with a deadline, not waiting blindly
	}
}

// checkTotals compares every stored parent with the naive recomputation from the stored
// leaves; it returns the first mismatch, or "" when all agree.
func checkTotals(ctx context.Context, t *testing.T, db *mongo.Database, project string, nodes []tree.Node, ticks []time.Time) string {
	t.Helper()
	rnodes := make([]rollup.Node, len(nodes))
	for i, n := range nodes {
		rnodes[i] = rollup.Node(n)
	}
	for _, tick := range ticks {
		cur, err := db.Collection(store.CountsCollection).Find(ctx, bson.D{{Key: "project", Value: project}, {Key: "timestamp", Value: tick}})
		if err != nil {
			return err.Error()
		}
		var docs []bson.Raw
		if err := cur.All(ctx, &docs); err != nil {
			return err.Error()
		}
		leaves := map[string]rollup.Leaf{}
		parents := map[string]rollup.Parent{}
		for _, d := range docs {
			if _, err := d.LookupErr(store.FieldRollup); err == nil {
				p, err := store.DecodeParent(d)
				if err != nil {
					t.Fatalf("parent document: %v", err)
				}
				if _, dup := parents[p.ID]; dup {
					return "duplicate parent document " + p.ID
				}
				parents[p.ID] = p
				continue
			}
			id, _ := d.Lookup("id").StringValueOK()
			typ, _ := d.Lookup("type").StringValueOK()
			online, _ := d.Lookup("online").AsInt64OK()
			if _, dup := leaves[id]; dup {
				return "duplicate leaf document " + id
			}
			leaves[id] = rollup.Leaf{Type: typ, Online: online}
		}
		want, err := rollup.FullRecompute(rnodes, leaves)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if _, isLeaf := leaves[n.ID]; isLeaf {
				continue
			}
			p, ok := parents[n.ID]
			w := want[n.ID]
			if !ok || p.Online != w.Online || p.Reported != w.Reported {
				return fmt.Sprintf("tick %s node %s: stored %+v (present %v), want %+v", tick.Format(time.RFC3339), n.ID, p, ok, w)
			}
		}
	}
	return ""
}
