package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/tree"
)

// The compose check: our machines cannot run Docker, so this test keeps docker-compose.yml
// honest instead. It checks the file's shape (services, dependencies, health checks, ports,
// volumes) and parses every rollup command in it with the command's own parser, under the
// service's environment, so a renamed subcommand or flag fails here and not at deploy time.

const (
	composePath    = "../../docker-compose.yml"
	dockerfilePath = "../../Dockerfile"
	repoRoot       = "../.."
	rollupImage    = "rollup:dev"
)

// composeFile is the part of the Compose specification docker-compose.yml uses; decoding
// with KnownFields fails on any other key, so a misspelt key (depend_on) is caught too.
type composeFile struct {
	Name       string                    `yaml:"name"`
	Services   map[string]composeService `yaml:"services"`
	Volumes    map[string]any            `yaml:"volumes"`
	Extensions map[string]any            `yaml:",inline"` // x-* anchors
}

type composeService struct {
	Image       string                       `yaml:"image"`
	Build       string                       `yaml:"build"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
	Environment map[string]string            `yaml:"environment"`
	DependsOn   map[string]composeDependency `yaml:"depends_on"`
	Ports       []string                     `yaml:"ports"`
	Volumes     []string                     `yaml:"volumes"`
	Healthcheck *composeHealthcheck          `yaml:"healthcheck"`
	Restart     string                       `yaml:"restart"`
	Profiles    []string                     `yaml:"profiles"`
}

type composeDependency struct {
	Condition string `yaml:"condition"`
}

type composeHealthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func TestComposeShape(t *testing.T) {
	c := loadCompose(t)
	for k := range c.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("unknown top-level key %q", k)
		}
	}
	for _, name := range append([]string{"mongo1", "mongo2", "mongo3", "mongo-init", "prometheus", "grafana"}, shardedMirrored...) {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	for _, name := range append([]string{"sharded-cfg", "sharded-shard1", "sharded-shard2", "sharded-rs-init", "sharded-mongos", "sharded-init"},
		shardedNames(shardedMirrored)...) {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s (profile sharded) is missing", name)
		}
	}
	hostPorts := map[string]string{}
	for name, s := range c.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		if s.Image == rollupImage && s.Build != "." {
			t.Errorf("%s: the rollup image is built from the Dockerfile: want build: .", name)
		}
		switch {
		case len(s.Profiles) == 0 && strings.HasPrefix(name, shardedPrefix):
			t.Errorf("%s: want profiles: [%s]", name, shardedProfile)
		case len(s.Profiles) > 0 && (!slices.Equal(s.Profiles, []string{shardedProfile}) || !strings.HasPrefix(name, shardedPrefix)):
			t.Errorf("%s: profiles %q: the only profile is %q, for services named %s*", name, s.Profiles, shardedProfile, shardedPrefix)
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			case !slices.Equal(s.Profiles, target.Profiles):
				// A default service waiting for a profiled one fails when the profile is off;
				// the sharded stack stays apart from the replica set's.
				t.Errorf("%s (profiles %q) depends on %s (profiles %q)", name, s.Profiles, dep, target.Profiles)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				t.Errorf("%s waits for %s to complete: give it restart: \"no\"", name, dep)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("%s: port %q: want HOST:CONTAINER", name, p)
			}
			if other, dup := hostPorts[host]; dup {
				t.Errorf("host port %s is published by %s and %s", host, other, name)
			}
			hostPorts[host] = name
		}
		for _, v := range s.Volumes {
			src, _, ok := strings.Cut(v, ":")
			switch {
			case !ok:
				t.Errorf("%s: volume %q: want SOURCE:TARGET[:ro]", name, v)
			case strings.HasPrefix(src, "./"):
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s: bind mount %s: %v", name, src, err)
				}
			default:
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: volume %s is not declared under volumes:", name, src)
				}
			}
		}
	}
	if err := composeCycle(c); err != nil {
		t.Error(err)
	}
}

// composeCycle returns an error naming a dependency cycle, if any.
func composeCycle(c composeFile) error {
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(string, []string) error
	visit = func(n string, path []string) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("dependency cycle: %s", strings.Join(append(path, n), " → "))
		case 2:
			return nil
		}
		state[n] = 1
		for dep := range c.Services[n].DependsOn {
			if err := visit(dep, append(path, n)); err != nil {
				return err
			}
		}
		state[n] = 2
		return nil
	}
	for n := range c.Services {
		if err := visit(n, nil); err != nil {
			return err
		}
	}
	return nil
}

// TestComposeReplicaSet: three mongod members of rs0 with health checks, the init script
// names exactly them, and rollup's connection string lists exactly them.
func TestComposeReplicaSet(t *testing.T) {
	c := loadCompose(t)
	var members []string
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, "mongo:") || len(s.Command) == 0 || s.Command[0] != "mongod" || len(s.Profiles) > 0 {
			continue
		}
		members = append(members, name+":27017")
		if s.Image != "mongo:7.0" {
			t.Errorf("%s: image %s, want mongo:7.0", name, s.Image)
		}
		if !slices.Equal(s.Command, []string{"mongod", "--replSet", "rs0", "--bind_ip_all"}) {
			t.Errorf("%s: command %q", name, s.Command)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Retries == 0 {
			t.Errorf("%s: no healthcheck", name)
		}
	}
	slices.Sort(members)
	if len(members) != 3 {
		t.Fatalf("replica set members %v, want 3", members)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "mongo-init.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !strings.Contains(string(script), `"`+m+`"`) {
			t.Errorf("deploy/mongo-init.js does not name member %s", m)
		}
	}
	init := c.Services["mongo-init"]
	if !slices.Contains(init.Command, "/deploy/mongo-init.js") || init.Restart != "no" {
		t.Errorf("mongo-init: command %q restart %q", init.Command, init.Restart)
	}
	for name, s := range c.Services {
		uri, ok := s.Environment["ROLLUP_MONGODB_URI"]
		if !ok || len(s.Profiles) > 0 {
			continue
		}
		want := "mongodb://" + strings.Join(members, ",") + "/?replicaSet=rs0"
		if uri != want {
			t.Errorf("%s: ROLLUP_MONGODB_URI %q, want %q", name, uri, want)
		}
		if s.DependsOn["mongo-init"].Condition == "" && s.DependsOn["migrate"].Condition == "" {
			t.Errorf("%s uses the replica set before mongo-init or migrate completed", name)
		}
	}
}

// rollupParsers parses a subcommand's arguments as the subcommand does, without running it.
func rollupParsers() map[string]func(*env, []string) error {
	return map[string]func(*env, []string) error{
		"serve":    func(e *env, a []string) error { _, err := parseServe(e, a); return err },
		"migrate":  func(e *env, a []string) error { _, err := parseMigrate(e, a); return err },
		"token":    func(e *env, a []string) error { _, err := parseToken(e, a); return err },
		"tree":     func(e *env, a []string) error { _, err := parseTree(e, a); return err },
		"simulate": func(e *env, a []string) error { _, err := parseSimulate(e, a); return err },
		"submit":   func(e *env, a []string) error { _, err := parseSubmit(e, a); return err },
		"replay":   func(e *env, a []string) error { _, err := parseReplay(e, a); return err },
		"verify":   func(e *env, a []string) error { _, err := parseVerify(e, a); return err },

		"retention": func(e *env, a []string) error { _, err := parseRetention(e, a); return err },
	}
}

// dockerfileEnv returns the ENV settings of the Dockerfile's final stage.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "FROM":
			clear(out) // only the last stage counts
		case len(f) > 1 && f[0] == "ENV":
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q: want KEY=VALUE", kv)
				}
				out[k] = v
			}
		}
	}
	return out
}

// TestComposeRollupCommands parses every rollup command of every rollup service with the
// subcommand's parser, under the image's and the service's environment.
func TestComposeRollupCommands(t *testing.T) {
	c := loadCompose(t)
	df, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), `ENTRYPOINT ["rollup"]`) || !strings.Contains(string(df), "./cmd/rollup") {
		t.Fatal(`Dockerfile: want the rollup binary built from ./cmd/rollup and ENTRYPOINT ["rollup"]`)
	}
	imageEnv := dockerfileEnv(t)
	cmds, parsers := commands(), rollupParsers()
	checked := 0
	for name, s := range c.Services {
		if s.Image != rollupImage {
			continue
		}
		invocations, err := serviceInvocations(s)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(invocations) == 0 {
			t.Errorf("%s: runs the rollup image but no rollup command", name)
		}
		for _, args := range invocations {
			t.Run(name+"/"+strings.Join(args, " "), func(t *testing.T) {
				for _, k := range os.Environ() { // only the container's environment counts
					if k, _, _ := strings.Cut(k, "="); strings.HasPrefix(k, settings.EnvPrefix) {
						t.Setenv(k, "")
						_ = os.Unsetenv(k)
					}
				}
				for k, v := range imageEnv {
					t.Setenv(k, v)
				}
				for k, v := range s.Environment {
					t.Setenv(k, v)
				}
				if len(args) == 0 {
					t.Fatal("no subcommand")
				}
				if _, ok := cmds[args[0]]; !ok {
					t.Fatalf("rollup has no subcommand %q", args[0])
				}
				parse, ok := parsers[args[0]]
				if !ok {
					t.Fatalf("no parser for %q in rollupParsers: add it", args[0])
				}
				var out strings.Builder
				if err := parse(&env{stdout: &out, stderr: &out}, args[1:]); err != nil {
					t.Fatalf("rollup %s: %v\n%s", strings.Join(args, " "), err, out.String())
				}
				checkPaths(t, c.Services[name], args)
				if args[0] == "serve" {
					cfg, _ := parseServe(&env{stdout: &out, stderr: &out}, args[1:])
					_, port, _ := strings.Cut(cfg.Listen, ":")
					published := false
					for _, p := range s.Ports {
						published = published || strings.HasSuffix(p, ":"+port)
					}
					if !published {
						t.Errorf("serve listens on %q; ports %q do not publish it", cfg.Listen, s.Ports)
					}
				}
			})
			checked++
		}
	}
	if checked < 6 {
		t.Errorf("checked %d rollup commands, want at least 6", checked)
	}
}

// checkPaths checks that every argument under a bind mount exists in the repository.
func checkPaths(t *testing.T, s composeService, args []string) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		for _, a := range args {
			if rel, ok := strings.CutPrefix(a, parts[1]+"/"); ok {
				if _, err := os.Stat(filepath.Join(repoRoot, parts[0], rel)); err != nil {
					t.Errorf("argument %s: %v", a, err)
				}
			}
		}
	}
}

// serviceInvocations returns the rollup argument lists a service runs: its command under the
// image's rollup entrypoint, or the rollup commands of its /bin/sh -c script.
func serviceInvocations(s composeService) ([][]string, error) {
	switch {
	case s.Entrypoint == nil:
		return [][]string{s.Command}, nil
	case slices.Equal(s.Entrypoint, []string{"/bin/sh", "-c"}) && len(s.Command) == 1:
		cmds, err := shellCommands(s.Command[0])
		if err != nil {
			return nil, err
		}
		var out [][]string
		for _, c := range cmds {
			if len(c) > 0 && c[0] == "rollup" {
				out = append(out, c[1:])
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("entrypoint %q: want none (rollup) or /bin/sh -c with one script", s.Entrypoint)
	}
}

// shellCommands splits a small sh script into its simple commands' words: quotes are
// honoured, redirections dropped with their targets; variables and substitutions are
// refused (their values could not be checked).
func shellCommands(script string) ([][]string, error) {
	var cmds [][]string
	var cur []string
	var word strings.Builder
	inWord, redirect := false, false
	endWord := func() {
		if !inWord {
			return
		}
		if redirect {
			redirect = false
		} else {
			cur = append(cur, word.String())
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	for i := 0; i < len(script); i++ {
		ch := script[i]
		switch {
		case ch == '$' || ch == '`':
			return nil, fmt.Errorf("script uses %q: the compose check cannot see the value", ch)
		case ch == ' ' || ch == '\t' || ch == '\n':
			endWord()
		case ch == '\'':
			j := strings.IndexByte(script[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			word.WriteString(script[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case ch == '"':
			j := strings.IndexByte(script[i+1:], '"')
			if j < 0 {
				return nil, errors.New("unterminated \" quote")
			}
			if strings.Contains(script[i+1:i+1+j], `\`) {
				return nil, errors.New(`backslash in a " quote: use ' quotes`)
			}
			word.WriteString(script[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case ch == '>' || ch == '<':
			endWord()
			if redirect {
				return nil, errors.New("redirection without a target")
			}
			if i+1 < len(script) && script[i+1] == '>' {
				i++
			}
			redirect = true
		case strings.IndexByte(";&|(){}", ch) >= 0:
			if redirect && !inWord {
				return nil, errors.New("redirection without a target")
			}
			endCmd()
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if redirect && !inWord {
		return nil, errors.New("redirection without a target")
	}
	endCmd()
	return cmds, nil
}

func TestShellCommands(t *testing.T) {
	tests := []struct {
		script string
		want   string // fmt of [][]string; "error" for an error
	}{
		{"rollup migrate up", "[[rollup migrate up]]"},
		{"test -s /f || { rollup token create --name 'a b' > /f.new && mv /f.new /f; }",
			"[[test -s /f] [rollup token create --name a b] [mv /f.new /f]]"},
		{`rollup tree show --project "demo" >/dev/null || rollup tree import x.yaml`, "[[rollup tree show --project demo] [rollup tree import x.yaml]]"},
		{"a >> log; b", "[[a] [b]]"},
		{"rollup --x=$HOME", "error"},
		{"echo `id`", "error"},
		{"echo 'open", "error"},
		{"a >", "error"},
	}
	for _, tc := range tests {
		got, err := shellCommands(tc.script)
		s := fmt.Sprint(got)
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("shellCommands(%q) = %s (%v), want %s", tc.script, s, err, tc.want)
		}
	}
}

// TestComposeDemoFlow: the tree the simulator reports is the one tree-import imports, a valid
// tree of the project whose token demo-token writes to the file the simulator reads, through
// a volume both mount.
func TestComposeDemoFlow(t *testing.T) {
	for _, prefix := range []string{"", shardedPrefix} {
		t.Run("stack="+prefix, func(t *testing.T) { checkDemoFlow(t, prefix) })
	}
}

// checkDemoFlow is TestComposeDemoFlow for the services named prefix+name.
func checkDemoFlow(t *testing.T, prefix string) {
	c := loadCompose(t)
	sim, tok, imp := c.Services[prefix+"simulator"], c.Services[prefix+"demo-token"], c.Services[prefix+"tree-import"]
	simArgs := flagValues(sim.Command)
	tokenFile := simArgs["--token-file"]
	if tokenFile == "" || !strings.Contains(tok.Command[0], "> "+tokenFile+".new") || !strings.Contains(tok.Command[0], "mv "+tokenFile+".new "+tokenFile) {
		t.Errorf("demo-token does not write the simulator's --token-file %q", tokenFile)
	}
	if volumeOf(sim, tokenFile) == "" || volumeOf(sim, tokenFile) != volumeOf(tok, tokenFile) {
		t.Errorf("simulator and demo-token do not share the volume of %s", tokenFile)
	}
	treeFile := simArgs["--tree"]
	if treeFile == "" || !strings.Contains(imp.Command[0], "tree import "+treeFile) {
		t.Errorf("tree-import does not import the simulator's --tree %q", treeFile)
	}
	tr, err := tree.ReadFile(filepath.Join(repoRoot, "deploy", filepath.Base(treeFile)), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tok.Command[0], "--project "+tr.Project()) || !strings.Contains(imp.Command[0], "--project "+tr.Project()) {
		t.Errorf("demo-token and tree-import must name the tree's project %q", tr.Project())
	}
	if url := simArgs["--url"]; url != "http://"+prefix+"rollup1:8080" || sim.DependsOn[prefix+"rollup1"].Condition == "" {
		t.Errorf("simulator --url %q: want the %srollup1 service it depends on", url, prefix)
	}
}

// flagValues maps each --flag of args to the argument after it.
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "--") {
			out[args[i]] = args[i+1]
		}
	}
	return out
}

// volumeOf returns the named volume a service mounts over path's directory.
func volumeOf(s composeService, path string) string {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && !strings.HasPrefix(parts[0], "./") && strings.HasPrefix(path, parts[1]+"/") {
			return parts[0]
		}
	}
	return ""
}
