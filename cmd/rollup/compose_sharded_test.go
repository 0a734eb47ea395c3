package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The compose check of the "sharded" profile: the same demo as the default stack on a
// sharded cluster (config server replica set, two shard replica sets, a mongos), with every
// rollup service pointed at the mongos. See docs/scaling.md.

const (
	shardedProfile = "sharded"
	shardedPrefix  = "sharded-"
	shardedMongos  = "sharded-mongos"
	shardedURI     = "mongodb://" + shardedMongos + ":27017/"
	configSet      = "cfgrs"
)

// shardedMirrored are the default stack's rollup services; the sharded profile runs each as
// shardedPrefix+name with the same commands.
var shardedMirrored = []string{"migrate", "tree-import", "demo-token", "grafana-token", "rollup1", "rollup2", "simulator"}

// shardedNames prefixes names with shardedPrefix.
func shardedNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = shardedPrefix + n
	}
	return out
}

// mongodRole is one mongod of the sharded profile as its command line says.
type mongodRole struct {
	service, set, member string
	configsvr, shardsvr  bool
}

// parseMongod reads a mongod command line of the sharded profile.
func parseMongod(name string, cmd []string) (mongodRole, error) {
	r := mongodRole{service: name}
	port := ""
	for i := 1; i < len(cmd); i++ {
		switch cmd[i] {
		case "--configsvr":
			r.configsvr = true
		case "--shardsvr":
			r.shardsvr = true
		case "--bind_ip_all":
		case "--replSet", "--port":
			if i+1 == len(cmd) {
				return r, fmt.Errorf("%s: %s without a value", name, cmd[i])
			}
			if cmd[i] == "--replSet" {
				r.set = cmd[i+1]
			} else {
				port = cmd[i+1]
			}
			i++
		default:
			return r, fmt.Errorf("%s: unexpected mongod argument %q", name, cmd[i])
		}
	}
	if r.configsvr == r.shardsvr || r.set == "" || port != "27017" {
		return r, fmt.Errorf("%s: %q: want --configsvr or --shardsvr, --replSet and --port 27017", name, cmd)
	}
	r.member = name + ":" + port
	return r, nil
}

// TestComposeSharded: the sharded profile has one config server set (cfgrs) and two shard
// sets, every mongod and the mongos with a healthcheck; the init script initiates exactly
// those sets with exactly their members; the mongos's --configdb is the config set; the shard
// script adds exactly the shard sets; the one-shots run in order; every rollup service talks
// to the mongos only after migrate (which shards counts) and mirrors its default-stack twin.
func TestComposeSharded(t *testing.T) {
	c := loadCompose(t)
	sets := map[string][]string{} // set → members
	var shardSets []string
	for name, s := range c.Services {
		if !slices.Contains(s.Profiles, shardedProfile) || len(s.Command) == 0 || s.Command[0] != "mongod" {
			continue
		}
		r, err := parseMongod(name, s.Command)
		if err != nil {
			t.Error(err)
			continue
		}
		if s.Image != "mongo:7.0" || s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Retries == 0 {
			t.Errorf("%s: image %s, healthcheck %+v: want mongo:7.0 with a healthcheck", name, s.Image, s.Healthcheck)
		}
		if (r.set == configSet) != r.configsvr {
			t.Errorf("%s: replica set %s: the config servers are the set %s, and only they", name, r.set, configSet)
		}
		if r.shardsvr && !slices.Contains(shardSets, r.set) {
			shardSets = append(shardSets, r.set)
		}
		sets[r.set] = append(sets[r.set], r.member)
	}
	slices.Sort(shardSets)
	if len(sets[configSet]) == 0 || len(shardSets) != 2 {
		t.Fatalf("config servers %v, shard sets %v: want a config server set and two shard sets", sets[configSet], shardSets)
	}
	for _, m := range sets {
		slices.Sort(m)
	}

	// The replica sets' init script.
	rsInit := c.Services["sharded-rs-init"]
	script := readMountedScript(t, rsInit)
	for set, members := range sets {
		line := regexp.MustCompile(`(?m)^.*_id: "` + regexp.QuoteMeta(set) + `".*$`).FindString(script)
		if line == "" {
			t.Errorf("sharded-rs-init's script does not initiate %s", set)
			continue
		}
		hosts := regexp.MustCompile(`host: "([^"]+)"`).FindAllStringSubmatch(line, -1)
		var got []string
		for _, h := range hosts {
			got = append(got, h[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, members) {
			t.Errorf("the script initiates %s with %v, compose runs %v", set, got, members)
		}
		if strings.Contains(line, "configsvr: true") != (set == configSet) {
			t.Errorf("the script's %s: configsvr: true exactly for %s: %s", set, configSet, line)
		}
	}
	for _, members := range sets {
		for _, m := range members {
			host, _, _ := strings.Cut(m, ":")
			if rsInit.DependsOn[host].Condition != "service_healthy" {
				t.Errorf("sharded-rs-init does not wait for %s to be healthy", host)
			}
		}
	}

	// The mongos.
	mongos, ok := c.Services[shardedMongos]
	if !ok {
		t.Fatalf("no %s service", shardedMongos)
	}
	want := []string{"mongos", "--configdb", configSet + "/" + strings.Join(sets[configSet], ","), "--port", "27017", "--bind_ip_all"}
	if !slices.Equal(mongos.Command, want) {
		t.Errorf("%s: command %q, want %q", shardedMongos, mongos.Command, want)
	}
	if mongos.Healthcheck == nil || mongos.Healthcheck.Retries == 0 || mongos.DependsOn["sharded-rs-init"].Condition != "service_completed_successfully" {
		t.Errorf("%s: want a healthcheck and to start after sharded-rs-init completed", shardedMongos)
	}

	// The shards script, through the mongos.
	shardInit := c.Services["sharded-init"]
	if !slices.Contains(shardInit.Command, shardedMongos+":27017") || shardInit.DependsOn[shardedMongos].Condition != "service_healthy" {
		t.Errorf("sharded-init: command %q: want mongosh --host %s:27017, after it is healthy", shardInit.Command, shardedMongos)
	}
	shards := readMountedScript(t, shardInit)
	var added []string
	for _, m := range regexp.MustCompile(`"([A-Za-z0-9_-]+)/([^"]+)"`).FindAllStringSubmatch(shards, -1) {
		added = append(added, m[1])
		if hosts := strings.Split(m[2], ","); !slices.Equal(sorted(hosts), sets[m[1]]) {
			t.Errorf("the shards script adds %s with %v, compose runs %v", m[1], hosts, sets[m[1]])
		}
	}
	if slices.Sort(added); !slices.Equal(added, shardSets) {
		t.Errorf("the shards script adds %v, want the shard sets %v", added, shardSets)
	}

	// rollup on the mongos, mirroring the default stack.
	for name, s := range c.Services {
		if !slices.Contains(s.Profiles, shardedProfile) {
			continue
		}
		uri, hasURI := s.Environment["ROLLUP_MONGODB_URI"]
		if s.Image == rollupImage && len(s.Environment) > 0 && (!hasURI || uri != shardedURI) {
			t.Errorf("%s: ROLLUP_MONGODB_URI %q, want the mongos %q", name, uri, shardedURI)
		}
		if hasURI && name != "sharded-migrate" && s.DependsOn["sharded-migrate"].Condition != "service_completed_successfully" {
			t.Errorf("%s uses the cluster before sharded-migrate (which shards counts) completed", name)
		}
	}
	if c.Services["sharded-migrate"].DependsOn["sharded-init"].Condition != "service_completed_successfully" {
		t.Error("sharded-migrate must wait for sharded-init (the shards added) to complete")
	}
	for _, name := range shardedMirrored {
		def, shd := c.Services[name], c.Services[shardedPrefix+name]
		a, errA := serviceInvocations(def)
		b, errB := serviceInvocations(shd)
		if errA != nil || errB != nil {
			t.Errorf("%s: %v %v", name, errA, errB)
			continue
		}
		if got, want := fmt.Sprint(b), strings.ReplaceAll(fmt.Sprint(a), "http://rollup1:", "http://"+shardedPrefix+"rollup1:"); got != want {
			t.Errorf("%s%s runs %s, its default twin %s", shardedPrefix, name, got, want)
		}
	}
}

// readMountedScript returns the repository file behind the --file argument of a mongosh
// one-shot, through its bind mount.
func readMountedScript(t *testing.T, s composeService) string {
	t.Helper()
	if s.Restart != "no" || len(s.Command) == 0 || s.Command[0] != "mongosh" {
		t.Fatalf("command %q restart %q: want a mongosh one-shot", s.Command, s.Restart)
	}
	path, ok := flagValues(s.Command)["--file"]
	if !ok {
		t.Fatalf("command %q: no --file", s.Command)
	}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		if rel, ok := strings.CutPrefix(path, parts[1]+"/"); ok {
			data, err := os.ReadFile(filepath.Join(repoRoot, parts[0], rel))
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
	t.Fatalf("%s is not under a bind mount of %q", path, s.Volumes)
	return ""
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// scriptHarness runs a mongosh script of the sharded profile under node, with the mongosh
// globals it uses stubbed: `new Mongo(host).getDB("admin").runCommand` answers
// replSetGetStatus (NotYetInitialized until replSetInitiate, unless the scenario is
// "initiated") and replSetInitiate; `db.adminCommand` (the mongos) answers listShards (none, or
// both shards when "initiated") and addShard. It prints the replSetInitiate and addShard calls
// as JSON; any other command fails the script.
const scriptHarness = `
const vm = require("vm"), fs = require("fs");
const file = process.argv[1], initiated = process.argv[2] === "initiated";
const calls = [], state = {};
class Quit extends Error { constructor(c) { super("quit " + c); this.code = c; } }
function admin(host) {
  return { runCommand(cmd) {
    const name = Object.keys(cmd)[0];
    calls.push({ host, name, arg: cmd[name] });
    if (name === "replSetGetStatus") {
      if (!(initiated || state[host])) { const e = new Error("no replset config"); e.codeName = "NotYetInitialized"; throw e; }
      return { ok: 1, members: [{ stateStr: "PRIMARY", name: host }] };
    }
    if (name === "replSetInitiate") { state[host] = true; return { ok: 1 }; }
    throw new Error("unexpected command " + name);
  } };
}
const ctx = {
  Mongo: function (host) { return { getDB() { return admin(host); } }; },
  db: { adminCommand(cmd) {
    const name = Object.keys(cmd)[0];
    calls.push({ host: "mongos", name, arg: cmd[name], shardName: cmd.name });
    if (name === "listShards") return { ok: 1, shards: initiated ? [{ _id: "shard1" }, { _id: "shard2" }] : [] };
    if (name === "addShard") return { ok: 1, shardAdded: cmd.name };
    throw new Error("unexpected command " + name);
  } },
  print: () => {}, sleep: () => {}, tojson: JSON.stringify, quit: (c) => { throw new Quit(c); },
};
try { vm.runInNewContext(fs.readFileSync(file, "utf8"), ctx); }
catch (e) { if (!(e instanceof Quit) || e.code) { console.error(String(e)); process.exit(1); } }
console.log(JSON.stringify(calls.filter((c) => c.name === "replSetInitiate" || c.name === "addShard")));
`

// scriptCall is one call the harness recorded.
type scriptCall struct {
	Host, Name, ShardName string
	Arg                   json.RawMessage
}

// runScript runs deploy/<file> under the harness in scenario ("fresh" or "initiated").
func runScript(t *testing.T, node, file, scenario string) []scriptCall {
	t.Helper()
	out, err := exec.Command(node, "-e", scriptHarness, filepath.Join(repoRoot, "deploy", file), scenario).CombinedOutput()
	if err != nil {
		t.Fatalf("%s (%s): %v\n%s", file, scenario, err, out)
	}
	var calls []scriptCall
	if err := json.Unmarshal(out, &calls); err != nil {
		t.Fatalf("%s (%s): %v\n%s", file, scenario, err, out)
	}
	return calls
}

// TestComposeShardedScripts runs the sharded profile's init scripts (with node, when it is
// installed) against stubbed mongosh globals: on a fresh cluster they initiate each replica
// set compose runs, with its members, on its first member, and add both shards; on a started
// one they do nothing.
func TestComposeShardedScripts(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the scripts' behaviour is not checked")
	}
	type member struct {
		ID   int    `json:"_id"`
		Host string `json:"host"`
	}
	type setConfig struct {
		ID        string   `json:"_id"`
		ConfigSvr bool     `json:"configsvr"`
		Members   []member `json:"members"`
	}
	want := map[string]setConfig{
		configSet: {ID: configSet, ConfigSvr: true, Members: []member{{0, "sharded-cfg:27017"}}},
		"shard1":  {ID: "shard1", Members: []member{{0, "sharded-shard1:27017"}}},
		"shard2":  {ID: "shard2", Members: []member{{0, "sharded-shard2:27017"}}},
	}
	calls := runScript(t, node, "mongo-sharded-init.js", "fresh")
	if len(calls) != len(want) {
		t.Fatalf("fresh cluster: %d replSetInitiate calls, want %d: %+v", len(calls), len(want), calls)
	}
	for _, c := range calls {
		var got setConfig
		if err := json.Unmarshal(c.Arg, &got); err != nil {
			t.Fatal(err)
		}
		if w := want[got.ID]; fmt.Sprint(got) != fmt.Sprint(w) || c.Host != w.Members[0].Host {
			t.Errorf("replSetInitiate on %s: %+v, want %+v on %s", c.Host, got, w, w.Members[0].Host)
		}
	}
	if calls := runScript(t, node, "mongo-sharded-init.js", "initiated"); len(calls) != 0 {
		t.Errorf("initiated cluster: %+v, want no replSetInitiate", calls)
	}

	calls = runScript(t, node, "mongo-sharded-shards.js", "fresh")
	var added []string
	for _, c := range calls {
		var arg string
		if err := json.Unmarshal(c.Arg, &arg); err != nil {
			t.Fatal(err)
		}
		added = append(added, c.ShardName+"="+arg)
	}
	if w := []string{"shard1=shard1/sharded-shard1:27017", "shard2=shard2/sharded-shard2:27017"}; !slices.Equal(added, w) {
		t.Errorf("fresh cluster: addShard %v, want %v", added, w)
	}
	if calls := runScript(t, node, "mongo-sharded-shards.js", "initiated"); len(calls) != 0 {
		t.Errorf("shards already added: %+v, want no addShard", calls)
	}
}

// composeCIOverridePath is the override .ci/compose-sharded starts the sharded profile with for
// the tests against real MongoDB (.github/workflows/mongodb.yml).
const (
	composeCIOverridePath = "../../.ci/compose-sharded-ci.yml"
	composeCIScriptPath   = "../../.ci/compose-sharded"
)

// TestComposeShardedCIOverride: the CI override turns test commands on for every mongod and the
// mongos of the sharded profile — each command exactly docker-compose.yml's with
// --setParameter enableTestCommands=1 appended, so the two cannot drift — and publishes the
// mongos on the loopback port whose URI .ci/compose-sharded prints. Strict decoding: any other
// key (an override that changes more than it says) fails.
func TestComposeShardedCIOverride(t *testing.T) {
	c := loadCompose(t)
	data, err := os.ReadFile(composeCIOverridePath)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("%s: %v", composeCIOverridePath, err)
	}
	var want []string // every mongod and mongos of the profile
	for name, s := range c.Services {
		if slices.Contains(s.Profiles, shardedProfile) && len(s.Command) > 0 && (s.Command[0] == "mongod" || s.Command[0] == "mongos") {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	got := slices.Sorted(maps.Keys(o.Services))
	if !slices.Equal(got, want) {
		t.Errorf("%s overrides %v, want every mongod and mongos of the sharded profile %v", composeCIOverridePath, got, want)
	}
	for name, s := range o.Services {
		base, ok := c.Services[name]
		if !ok {
			continue
		}
		if w := append(slices.Clone(base.Command), "--setParameter", "enableTestCommands=1"); !slices.Equal(s.Command, w) {
			t.Errorf("%s: command %q, want docker-compose.yml's with test commands: %q", name, s.Command, w)
		}
		if name != shardedMongos && len(s.Ports) > 0 {
			t.Errorf("%s: ports %q: only the mongos is published", name, s.Ports)
		}
	}
	ports := o.Services[shardedMongos].Ports
	if len(ports) != 1 || !strings.HasPrefix(ports[0], "127.0.0.1:") || !strings.HasSuffix(ports[0], ":27017") {
		t.Fatalf("%s: ports %q, want one 127.0.0.1:PORT:27017", shardedMongos, ports)
	}
	hostPort := strings.Split(ports[0], ":")[1]
	for name, s := range c.Services { // the demo's published ports stay free
		for _, p := range s.Ports {
			if h, _, _ := strings.Cut(p, ":"); h == hostPort {
				t.Errorf("%s publishes %s too", name, hostPort)
			}
		}
	}
	script, err := os.ReadFile(composeCIScriptPath)
	if err != nil {
		t.Fatal(err)
	}
	if uri := "mongodb://127.0.0.1:" + hostPort + "/"; !bytes.Contains(script, []byte(`echo "`+uri+`"`)) {
		t.Errorf("%s does not print the mongos's URI %s", composeCIScriptPath, uri)
	}
	if !bytes.Contains(script, []byte("-f .ci/compose-sharded-ci.yml --profile "+shardedProfile)) {
		t.Errorf("%s does not start compose with %s", composeCIScriptPath, composeCIOverridePath)
	}
}
