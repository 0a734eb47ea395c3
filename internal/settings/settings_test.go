package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mapEnv is a LookupEnv over a map.
func mapEnv(m map[string]string) LookupEnv {
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
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// testFlags is a FlagSet with one flag of each kind apply sees.
type testFlags struct {
	fs     *FlagSet
	str    string
	num    int
	on     bool
	period time.Duration
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: New("test", "usage: rollup test\n", io.Discard)}
	f.fs.StringVar(&f.str, "a-string", "default", "")
	f.fs.IntVar(&f.num, "a-number", 7, "")
	f.fs.BoolVar(&f.on, "on", false, "")
	f.fs.DurationVar(&f.period, "period", time.Second, "")
	return f
}

// TestPrecedence tries every combination of sources for a setting (on the command line, in
// the environment, in the file) against the rule flag > env > file > default, for every kind
// of flag at once.
func TestPrecedence(t *testing.T) {
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
					env[EnvName(k.name)] = k.envV
				}
				if inFile {
					fmt.Fprintf(&file, "%s: %q\n", k.name, k.fileV)
				}
			}
			args = append(args, "--config", writeFile(t, "c.yaml", file.String()))
			f := newTestFlags()
			if err := f.fs.Parse(args, mapEnv(env)); err != nil {
				t.Fatal(err)
			}
			for _, k := range kinds {
				want, wantSrc := k.defV, SourceDefault
				switch {
				case inFlag:
					want, wantSrc = k.flagV, SourceFlag
				case inEnv:
					want, wantSrc = k.envV, "environment variable "+EnvName(k.name)
				case inFile:
					want, wantSrc = k.fileV, "config file"
				}
				if got := k.get(f); got != want {
					t.Errorf("%s = %q, want %q", k.name, got, want)
				}
				if got := f.fs.Source(k.name); !strings.HasPrefix(got, wantSrc) {
					t.Errorf("%s source %q, want %q", k.name, got, wantSrc)
				}
			}
		})
	}
}

func TestFileChoice(t *testing.T) {
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
			if err := f.fs.Parse(tc.args, mapEnv(tc.env)); err != nil {
				t.Fatal(err)
			}
			if f.str != tc.want {
				t.Errorf("a-string = %q, want %q", f.str, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
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
			err := f.fs.Parse(args, mapEnv(tc.env))
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

// TestParseArgs: flags and arguments in any order, "--" ends the flags, the environment
// still applies; ParseTrailing stops at the first argument; Parse takes flags only.
func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantStr string
		wantOn  bool
	}{
		{nil, nil, "env", false},
		{[]string{"up"}, []string{"up"}, "env", false},
		{[]string{"--on", "import", "--a-string", "f", "file.yaml"}, []string{"import", "file.yaml"}, "f", true},
		{[]string{"show", "--", "--on", "x"}, []string{"show", "--on", "x"}, "env", false},
		{[]string{"-", "--on"}, []string{"-"}, "env", true},
	}
	for _, tc := range tests {
		f := newTestFlags()
		pos, err := f.fs.ParseArgs(tc.args, mapEnv(map[string]string{"ROLLUP_A_STRING": "env"}))
		if err != nil || fmt.Sprint(pos) != fmt.Sprint(tc.wantPos) || f.str != tc.wantStr || f.on != tc.wantOn {
			t.Errorf("%q: got %q, %v, a-string %q, on %v; want %q, %q, %v", tc.args, pos, err, f.str, f.on, tc.wantPos, tc.wantStr, tc.wantOn)
		}
	}
	f := newTestFlags()
	rest, err := f.fs.ParseTrailing([]string{"--on", "-", "--a-string", "x"}, mapEnv(nil))
	if err != nil || fmt.Sprint(rest) != "[- --a-string x]" || !f.on || f.str != "default" {
		t.Errorf("ParseTrailing: %q, %v, on %v, a-string %q", rest, err, f.on, f.str)
	}
	f = newTestFlags()
	if err := f.fs.Parse([]string{"--on", "extra"}, mapEnv(nil)); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Errorf("Parse with an argument: %v", err)
	}
}

// TestFlagOnly: a flag-only setting ignores its environment variable and is refused in the
// file.
func TestFlagOnly(t *testing.T) {
	f := newTestFlags()
	f.fs.FlagOnly("a-string")
	if err := f.fs.Parse(nil, mapEnv(map[string]string{"ROLLUP_A_STRING": "env"})); err != nil || f.str != "default" {
		t.Fatalf("a-string = %q, %v; want the default", f.str, err)
	}
	f = newTestFlags()
	f.fs.FlagOnly("a-string")
	err := f.fs.Parse([]string{"--config", writeFile(t, "c.yaml", "a-string: x\n")}, mapEnv(nil))
	if err == nil || !strings.Contains(err.Error(), "command line only") {
		t.Fatalf("file key of a flag-only setting: %v", err)
	}
}

// TestHelp: --help shows the usage text, every flag with its environment variable (none for a
// flag-only one) and the sources rule, and never a value from the environment.
func TestHelp(t *testing.T) {
	var out strings.Builder
	fs := New("x", "usage: rollup x\n\nFlags:\n", &out)
	var uri, target string
	fs.StringVar(&uri, "mongodb-uri", "", "MongoDB connection string")
	fs.StringVar(&target, "target", "", "benchmark target")
	fs.Int("n", 3, "count")
	fs.FlagOnly("target")
	err := fs.Parse([]string{"--help"}, mapEnv(map[string]string{"ROLLUP_MONGODB_URI": "mongodb://u:hunter2@h"}))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v, want flag.ErrHelp", err)
	}
	for _, w := range []string{"usage: rollup x", "--mongodb-uri string\n      MongoDB connection string (env ROLLUP_MONGODB_URI)",
		"--n int\n      count (default 3, env ROLLUP_N)", "--target string\n      benchmark target\n", "--config string", "env ROLLUP_CONFIG",
		"flag > environment > file > default"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("help lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Error("help shows the URI of the environment")
	}
}

// TestExplain: an Invalid error, even wrapped, comes back with its setting's source; other
// errors pass unchanged.
func TestExplain(t *testing.T) {
	f := newTestFlags()
	if err := f.fs.Parse(nil, mapEnv(map[string]string{"ROLLUP_A_NUMBER": "9"})); err != nil {
		t.Fatal(err)
	}
	err := f.fs.Explain(fmt.Errorf("check: %w", Invalid("a-number", "too big: %d", 9)))
	if got := err.Error(); got != "--a-number (from environment variable ROLLUP_A_NUMBER): too big: 9" {
		t.Errorf("got %q", got)
	}
	plain := errors.New("plain")
	if err := f.fs.Explain(plain); err != plain || f.fs.Explain(nil) != nil { //nolint:errorlint // the very same error
		t.Error("Explain changed an error without a setting")
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

func TestCheckListenAddr(t *testing.T) {
	for in, ok := range map[string]bool{
		":8080": true, "127.0.0.1:0": true, "[::1]:8080": true,
		"localhost": false, ":http": false, ":65536": false,
	} {
		if err := CheckListenAddr(in); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", in, err, ok)
		}
	}
}

// TestOwnConfig: with OwnConfig, --config (or ROLLUP_CONFIG) is the command's own file: a file
// no settings parser could read is not read, the other flags still come from the environment,
// and --help says so.
func TestOwnConfig(t *testing.T) {
	own := writeFile(t, "agent.yaml", "sources:\n  - name: x\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"--config", []string{"--config", own}, map[string]string{"ROLLUP_A_STRING": "env"}},
		{"ROLLUP_CONFIG", nil, map[string]string{"ROLLUP_CONFIG": own, "ROLLUP_A_STRING": "env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFlags()
			f.fs.OwnConfig("the agent's YAML file")
			if err := f.fs.Parse(tc.args, mapEnv(tc.env)); err != nil {
				t.Fatal(err)
			}
			if got := f.fs.Lookup(ConfigFlag).Value.String(); got != own {
				t.Errorf("--config = %q, want %q", got, own)
			}
			if f.str != "env" {
				t.Errorf("a-string = %q, want env", f.str)
			}
		})
	}
	var out strings.Builder
	fs := New("x", "usage: rollup x\n", &out)
	fs.OwnConfig("the agent's YAML file")
	if err := fs.Parse([]string{"--help"}, mapEnv(nil)); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(out.String(), "the agent's YAML file") || strings.Contains(out.String(), "> file >") {
		t.Errorf("help:\n%s", out.String())
	}
}
