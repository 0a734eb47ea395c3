package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mapEnv is a lookupEnv over a map.
func mapEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// writeFile writes text to a new file in a test directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"mongodb-uri": "ROLLUP_MONGODB_URI", "listen": "ROLLUP_LISTEN", "token-file": "ROLLUP_TOKEN_FILE",
		"demo-agents": "ROLLUP_DEMO_AGENTS", "config": "ROLLUP_CONFIG",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// testFlags is a FlagSet with one flag of each kind applyConfig sees.
type testFlags struct {
	fs     *flag.FlagSet
	str    string
	num    int
	on     bool
	period time.Duration
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: flag.NewFlagSet("test", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.StringVar(&f.str, "a-string", "default", "")
	f.fs.IntVar(&f.num, "a-number", 7, "")
	f.fs.BoolVar(&f.on, "on", false, "")
	f.fs.DurationVar(&f.period, "period", time.Second, "")
	registerConfig(f.fs)
	return f
}

// TestApplyConfigPrecedence tries every combination of sources for a setting (on the
// command line, in the environment, in the file) against the rule flag > env > file >
// default, for every kind of flag at once.
func TestApplyConfigPrecedence(t *testing.T) {
	type kind struct {
		name                     string
		flagV, envV, fileV, defV string
		get                      func(*testFlags) string
	}
	kinds := []kind{
		{"a-string", "f", "e", "x", "default", func(f *testFlags) string { return f.str }},
		{"a-number", "1", "2", "3", "7", func(f *testFlags) string { return fmt.Sprint(f.num) }},
		{"on", "true", "false", "true", "false", func(f *testFlags) string { return fmt.Sprint(f.on) }},
		{"period", "1m0s", "2m0s", "3m0s", "1s", func(f *testFlags) string { return f.period.String() }},
	}
	for mask := range 8 {
		inFlag, inEnv, inFile := mask&1 != 0, mask&2 != 0, mask&4 != 0
		t.Run(fmt.Sprintf("flag=%v,env=%v,file=%v", inFlag, inEnv, inFile), func(t *testing.T) {
			var args []string
			env := map[string]string{}
			var file strings.Builder
			for _, k := range kinds {
				if inFlag {
					args = append(args, "--"+k.name+"="+k.flagV)
				}
				if inEnv {
					env[envName(k.name)] = k.envV
				}
				if inFile {
					fmt.Fprintf(&file, "%s: %q\n", k.name, k.fileV)
				}
			}
			args = append(args, "--config", writeFile(t, "c.yaml", file.String()))
			f := newTestFlags()
			if err := f.fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			s, err := applyConfig(f.fs, mapEnv(env))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range kinds {
				want, wantSrc := k.defV, sourceDefault
				switch {
				case inFlag:
					want, wantSrc = k.flagV, sourceFlag
				case inEnv:
					want, wantSrc = k.envV, "environment variable "+envName(k.name)
				case inFile:
					want, wantSrc = k.fileV, "config file"
				}
				if got := k.get(f); got != want {
					t.Errorf("%s = %q, want %q", k.name, got, want)
				}
				if got := s.source(k.name); !strings.HasPrefix(got, wantSrc) {
					t.Errorf("%s source %q, want %q", k.name, got, wantSrc)
				}
			}
		})
	}
}

func TestApplyConfigFileChoice(t *testing.T) {
	fromFlag := writeFile(t, "flag.yaml", "a-string: from-flag-file\n")
	fromEnv := writeFile(t, "env.yaml", "a-string: from-env-file\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no file", nil, nil, "default"},
		{"--config", []string{"--config", fromFlag}, nil, "from-flag-file"},
		{"ROLLUP_CONFIG", nil, map[string]string{"ROLLUP_CONFIG": fromEnv}, "from-env-file"},
		{"--config beats ROLLUP_CONFIG", []string{"--config", fromFlag}, map[string]string{"ROLLUP_CONFIG": fromEnv}, "from-flag-file"},
		{"empty ROLLUP_CONFIG is no file", nil, map[string]string{"ROLLUP_CONFIG": ""}, "default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			if err := f.fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if _, err := applyConfig(f.fs, mapEnv(tc.env)); err != nil {
				t.Fatal(err)
			}
			if f.str != tc.want {
				t.Errorf("a-string = %q, want %q", f.str, tc.want)
			}
		})
	}
}

func TestApplyConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string // config file text; "" = no file
		env     map[string]string
		wantErr []string // substrings of the error
	}{
		{"unknown key", "a-string: x\ntypo: 1\n", nil, []string{"line 2", `unknown setting "typo"`, "'rollup test'"}},
		{"bad number in the file", "a-number: many\n", nil, []string{"--a-number", "config file", "line 1"}},
		{"bad bool in the environment", "", map[string]string{"ROLLUP_ON": "yes please"}, []string{"--on", "environment variable ROLLUP_ON"}},
		{"bad duration in the environment", "", map[string]string{"ROLLUP_PERIOD": "5"}, []string{"--period", "ROLLUP_PERIOD"}},
		{"duplicate key", "on: true\non: false\n", nil, []string{"line 2", `"on" is already set on line 1`}},
		{"list value", "a-string: [a, b]\n", nil, []string{"line 1", "single value"}},
		{"null value", "a-string:\n", nil, []string{"line 1", "has no value"}},
		{"config in the file", "config: other.yaml\n", nil, []string{`"config" cannot be set`}},
		{"not a mapping", "- a\n- b\n", nil, []string{"mapping of settings"}},
		{"bad YAML", "a: [\n", nil, []string{"parse YAML"}},
		{"missing file", "\x00missing", nil, []string{"read config file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			var args []string
			switch {
			case tc.file == "\x00missing":
				args = []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}
			case tc.file != "":
				args = []string{"--config", writeFile(t, "c.yaml", tc.file)}
			}
			if err := f.fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			_, err := applyConfig(f.fs, mapEnv(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	for _, text := range []string{"", "  \n", "# only a comment\n", "~\n"} {
		got, err := parseConfig([]byte(text))
		if err != nil || len(got) != 0 {
			t.Errorf("%q: %v, %v; want no settings", text, got, err)
		}
	}
	got, err := parseConfig([]byte("listen: ':8080'\ndemo: true\nx: &a 5\ny: *a\nempty: \"\"\n"))
	want := []fileSetting{{"listen", ":8080", 1}, {"demo", "true", 2}, {"x", "5", 3}, {"y", "5", 4}, {"empty", "", 5}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: [1]\n", "- 1\n", "a: &x 1\nb: *x\n", "a: {b: c}\n", "? [a]\n: b\n", "a: 1\na: 2\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, err := parseConfig([]byte(text))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range got {
			if s.key == "" || seen[s.key] || s.line < 1 {
				t.Fatalf("setting %+v of %q", s, text)
			}
			seen[s.key] = true
		}
	})
}

func TestRedactURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"mongodb://db1", "mongodb://db1"},
		{"mongodb://user:s3cret@db1:27017,db2:27018/rollup?replicaSet=rs0&authSource=admin", "mongodb://db1:27017,db2:27018"},
		{"mongodb+srv://u:p@cluster0.example.net/?retryWrites=true", "mongodb+srv://cluster0.example.net"},
		{"mongodb://u:p%40ss@[::1]:27017/?tls=true", "mongodb://[::1]:27017"},
		{"mongodb://db1/?authMechanismProperties=AWS_SESSION_TOKEN:abc", "mongodb://db1"},
		{"mongodb://db1/?appName=a@b", "mongodb://(unparsable)"},
		{"mongodb://u:pa/ss@db1", "mongodb://db1"},           // unescaped '/' in the password
		{"mongodb://u:pa?ss@db1", "mongodb://(unparsable)"},  // unescaped '?' in the password
		{"mongodb://u:1234?x@db1", "mongodb://(unparsable)"}, // would show u:1234 as a host
		{"mongodb://u:1234/x@db1", "mongodb://db1"},          // idem
		{"postgres://u:p@db1", "(unparsable)"},
		{"db1:27017", "(unparsable)"},
		{"mongodb://", "mongodb://(unparsable)"},
	}
	for _, tc := range tests {
		if got := redactURI(tc.in); got != tc.want {
			t.Errorf("redactURI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactURI: whatever the user and password, a well-formed URI shows its hosts only.
func FuzzRedactURI(f *testing.F) {
	f.Add("user", "s3cret", "rollup", "replicaSet=rs0")
	f.Add("u@x", "p:/?@", "", "appName=a@b")
	f.Fuzz(func(t *testing.T, user, password, db, query string) {
		uri := "mongodb://" + url.QueryEscape(user) + ":" + url.QueryEscape(password) + "@db1.example:27017,db2.example/" +
			url.QueryEscape(db) + "?" + query
		if got := redactURI(uri); got != "mongodb://db1.example:27017,db2.example" {
			t.Fatalf("redactURI(%q) = %q", uri, got)
		}
		// Any input: the result is empty, marked unparsable, or scheme and hosts without '@'.
		raw := user + password + db + query
		got := redactURI(raw)
		if got != "" && !strings.HasSuffix(got, "(unparsable)") && (strings.Contains(got, "@") || !strings.Contains(raw, strings.SplitN(got, "://", 2)[1])) {
			t.Fatalf("redactURI(%q) = %q", raw, got)
		}
	})
}

func TestCheckSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func(string) error
		in    string
		ok    bool
	}{
		{"uri empty", checkMongoURI, "", true},
		{"uri", checkMongoURI, "mongodb://a,b,c/?replicaSet=rs0", true},
		{"uri srv", checkMongoURI, "mongodb+srv://u:p@c.example.net", true},
		{"uri no scheme", checkMongoURI, "db1:27017", false},
		{"uri no host", checkMongoURI, "mongodb:///x", false},
		{"uri bad password", checkMongoURI, "mongodb://u:p/w@db1", false},
		{"db", checkDatabaseName, "rollup", true},
		{"db empty", checkDatabaseName, "", false},
		{"db dot", checkDatabaseName, "a.b", false},
		{"db long", checkDatabaseName, strings.Repeat("x", 64), false},
		{"listen", checkListenAddr, ":8080", true},
		{"listen host", checkListenAddr, "127.0.0.1:0", true},
		{"listen v6", checkListenAddr, "[::1]:8080", true},
		{"listen no port", checkListenAddr, "localhost", false},
		{"listen bad port", checkListenAddr, ":http", false},
		{"listen big port", checkListenAddr, ":65536", false},
	} {
		if err := tc.check(tc.in); (err == nil) != tc.ok {
			t.Errorf("%s: %q: err %v, want ok=%v", tc.name, tc.in, err, tc.ok)
		}
	}
}

func TestParseServeConfig(t *testing.T) {
	file := writeFile(t, "serve.yaml", "listen: ':9000'\nlog-level: debug\ndatabase: fromfile\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(serveConfig) bool
		wantErr []string
	}{
		{"defaults", nil, nil, func(c serveConfig) bool {
			return c.listen == "127.0.0.1:8080" && c.database == "rollup" && c.mongoURI == "" && c.dataDir == "rollup-data" && c.demoAgents == 20
		}, nil},
		{"env", nil, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://a,b/?replicaSet=rs0", "ROLLUP_LISTEN": ":8081"}, func(c serveConfig) bool {
			return c.mongoURI == "mongodb://a,b/?replicaSet=rs0" && c.listen == ":8081"
		}, nil},
		{"flag > env > file", []string{"--config", file, "--listen", ":1"}, map[string]string{"ROLLUP_LISTEN": ":2", "ROLLUP_LOG_LEVEL": "warn"}, func(c serveConfig) bool {
			return c.listen == ":1" && c.logLevel == "warn" && c.database == "fromfile" && c.sources.source("database") == "config file "+file+" line 3"
		}, nil},
		{"demo with a URI from the environment", []string{"--demo"}, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://a"}, nil,
			[]string{"--mongodb-uri (from environment variable ROLLUP_MONGODB_URI)", "--demo"}},
		{"bad listen from the file", []string{"--config", writeFile(t, "bad.yaml", "listen: nowhere\n")}, nil, nil,
			[]string{"--listen (from config file", "line 1", "host:port"}},
		{"bad log level", []string{"--log-level", "loud"}, nil, nil, []string{"--log-level (from flag)", `"loud"`}},
		{"bad demo agents", nil, map[string]string{"ROLLUP_DEMO_AGENTS": "0"}, nil, []string{"--demo-agents (from environment variable ROLLUP_DEMO_AGENTS)"}},
		{"unparsable demo agents", nil, map[string]string{"ROLLUP_DEMO_AGENTS": "x"}, nil, []string{"--demo-agents (from environment variable ROLLUP_DEMO_AGENTS)"}},
		{"bad database", []string{"--database", "a.b"}, nil, nil, []string{"--database (from flag)"}},
		{"URI not echoed", nil, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://u:hunter2/x@h"}, nil, []string{"--mongodb-uri (from environment"}},
		{"empty data dir", []string{"--data", ""}, nil, nil, []string{"--data (from flag)"}},
		{"client timeout in the URI", []string{"--mongodb-uri", "mongodb://h/?timeoutMS=5000"}, nil, nil,
			[]string{"--mongodb-uri (from flag)", "timeoutMS=5000", "retry"}},
		{"unknown file key", []string{"--config", writeFile(t, "typo.yaml", "lisen: ':1'\n")}, nil, nil, []string{`unknown setting "lisen"`}},
		{"argument", []string{"extra"}, nil, nil, []string{`unexpected argument "extra"`}},
		{"instance id: flag > env", []string{"--instance-id", "a-1"}, map[string]string{"ROLLUP_INSTANCE_ID": "b"}, func(c serveConfig) bool {
			return c.instanceID == "a-1"
		}, nil},
		{"instance id from the environment", nil, map[string]string{"ROLLUP_INSTANCE_ID": "pod-7"}, func(c serveConfig) bool {
			return c.instanceID == "pod-7" && c.sources.source("instance-id") == "environment variable ROLLUP_INSTANCE_ID"
		}, nil},
		{"instance id with a space", []string{"--instance-id", "a b"}, nil, nil, []string{"--instance-id (from flag)", "space"}},
		{"instance id too long", []string{"--instance-id", strings.Repeat("x", 201)}, nil, nil, []string{"--instance-id (from flag)", "at most 200"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c, err := parseServeEnv(&env{stdout: &out, stderr: &out}, tc.args, mapEnv(tc.env))
			if tc.wantErr == nil {
				if err != nil || !tc.check(c) {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestDefaultInstanceID: the embedded store keeps its id in the data directory (the same after
// a restart); an external store's default is host@listen.
func TestDefaultInstanceID(t *testing.T) {
	dir := t.TempDir()
	first, err := defaultInstanceID(dir, "127.0.0.1:8080")
	if err != nil || first == "" || checkInstanceID(first) != nil {
		t.Fatalf("first = %q, %v", first, err)
	}
	again, err := defaultInstanceID(dir, ":9999")
	if err != nil || again != first {
		t.Fatalf("after a restart: %q, %v; want %q", again, err, first)
	}
	if other, _ := defaultInstanceID(t.TempDir(), "127.0.0.1:8080"); other == first {
		t.Fatalf("two data directories share the id %q", first)
	}
	host, _ := os.Hostname()
	if id, err := defaultInstanceID("", ":8080"); err != nil || id != host+"@:8080" {
		t.Fatalf("external store: %q, %v; want %q", id, err, host+"@:8080")
	}
}

func TestParseServeHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseServeEnv(&env{stdout: &out, stderr: &out}, []string{"--help"}, mapEnv(map[string]string{"ROLLUP_MONGODB_URI": "mongodb://u:hunter2@h"}))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v, want flag.ErrHelp", err)
	}
	for _, w := range []string{"-config", "ROLLUP_<FLAG>", "flag > environment > file > default"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("help lacks %q", w)
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Error("help shows the URI of the environment")
	}
}

func TestServeLogFields(t *testing.T) {
	c := serveConfig{mongoURI: "mongodb://admin:hunter2@db1,db2/?replicaSet=rs0"}
	for _, f := range c.logFields() {
		if strings.Contains(f.String, "hunter2") || strings.Contains(f.String, "admin") {
			t.Errorf("log field %s = %q shows a secret", f.Key, f.String)
		}
		if f.Key == "mongodb_uri" && f.String != "mongodb://db1,db2" {
			t.Errorf("mongodb_uri = %q", f.String)
		}
	}
}
