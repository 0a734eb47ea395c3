package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

func TestParseTree(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	at := time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC)
	tests := []parseCase[treeConfig]{
		{args: []string{"import", "t.yaml", "--mongodb-uri", "mongodb://m"}, want: treeConfig{sub: "import", file: "t.yaml", store: storeFlags{uri: "mongodb://m", database: "rollup"}}},
		{args: []string{"--project", "p", "import", "--effective", "2024-05-01T10:05:00Z", "t.json", "--mongodb-uri", "mongodb://m", "--database", "d"},
			want: treeConfig{sub: "import", file: "t.json", project: "p", effective: at, store: storeFlags{uri: "mongodb://m", database: "d"}}},
		{args: []string{"show", "--project", "p", "--at", "2024-05-01T10:05:00Z", "--json", "--mongodb-uri", "mongodb://m"},
			want: treeConfig{sub: "show", project: "p", at: at, json: true, store: storeFlags{uri: "mongodb://m", database: "rollup"}}},
		{args: []string{"show", "--project", "p", "--version", "3", "--mongodb-uri", "mongodb://m"}, want: treeConfig{sub: "show", project: "p", version: 3, store: storeFlags{uri: "mongodb://m", database: "rollup"}}},
		{args: []string{"validate", "t.yaml"}, want: treeConfig{sub: "validate", file: "t.yaml", store: storeFlags{database: "rollup"}}},
		{args: []string{"import", "t.yaml"}, wantErr: "pass --mongodb-uri"},
		{args: []string{"show", "--project", "p"}, wantErr: "pass --mongodb-uri"},
		{args: []string{}, wantErr: "subcommand is required"},
		{args: []string{"delete", "x"}, wantErr: `unknown subcommand "delete"`},
		{args: []string{"import", "--mongodb-uri", "mongodb://m"}, wantErr: "takes one FILE"},
		{args: []string{"import", "a", "b", "--mongodb-uri", "mongodb://m"}, wantErr: "takes one FILE"},
		{args: []string{"show", "x", "--project", "p", "--mongodb-uri", "mongodb://m"}, wantErr: `unexpected argument "x"`},
		{args: []string{"show", "--mongodb-uri", "mongodb://m"}, wantErr: "needs --project"},
		{args: []string{"show", "--project", "p", "--version", "1", "--at", "2024-05-01T10:05:00Z", "--mongodb-uri", "mongodb://m"}, wantErr: "exclude each other"},
		{args: []string{"show", "--project", "p", "--version", "-1", "--mongodb-uri", "mongodb://m"}, wantErr: "must be positive"},
		{args: []string{"show", "--project", "p", "--at", "yesterday", "--mongodb-uri", "mongodb://m"}, wantErr: "--at"},
		{args: []string{"import", "f", "--effective", "10:05", "--mongodb-uri", "mongodb://m"}, wantErr: "--effective"},
		{args: []string{"show", "--project", "p", "--effective", "2024-05-01T10:05:00Z", "--mongodb-uri", "mongodb://m"}, wantErr: "--effective is for"},
		{args: []string{"import", "f", "--json", "--mongodb-uri", "mongodb://m"}, wantErr: "are for 'tree show'"},
		{args: []string{"import", "f", "--database", "", "--mongodb-uri", "mongodb://m"}, wantErr: "--database"},
		{args: []string{"import", "f", "--bogus"}, wantErr: "bogus"},
	}
	checkParse(t, parseTree, tests)
}

func TestRunTreeNoURIIsUsageError(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	var out, errOut strings.Builder
	err := run(context.Background(), &env{stdout: &out, stderr: &errOut}, []string{"tree", "import", "x.yaml"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--mongodb-uri") || !strings.Contains(err.Error(), "tree validate") {
		t.Fatalf("err = %v, want a usage error pointing to --mongodb-uri and tree validate", err)
	}
	if code := exitCode(&errOut, err); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

func writeTreeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunTreeValidate(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	tests := []struct {
		name, content string
		args          []string
		want          []string
		wantErr       []string
	}{
		{"ok.yaml", "project: demo\nroot: {id: demo, type: project, children: [{id: g1, type: group}, {id: g2, type: group}]}\n", nil,
			[]string{"project demo, 3 nodes, 2 leaves, 2 levels: valid"}, nil},
		{"noproject.json", `{"nodes": [{"id": "r", "type": "t"}]}`, []string{"--project", "given"}, []string{"project given, 1 nodes"}, nil},
		{"noproject.yml", "nodes: [{id: r, type: t}]\n", nil, nil, []string{"names no project"}},
		{"mismatch.yml", "project: a\nnodes: [{id: r, type: t}]\n", []string{"--project", "b"}, nil, []string{`project "a", not "b"`}},
		{"bad.yaml", "project: demo\nnodes:\n  - {id: r, type: t}\n  - {id: a, type: t, parent: ghost}\n  - {id: r, type: t}\n  - {id: s, type: t}\n",
			nil, nil, []string{"bad.yaml: invalid tree for project \"demo\", 3 problem(s):", "\n  line 3: duplicate id:", "\n  line 4: missing parent: node \"a\"", "\n  line 3: more than one root"}},
		{"syntax.json", "{\"project\": \"demo\",\n\"root\": {\"id\": 1,, }}", nil, nil, []string{"syntax.json: line 2: json: invalid character ','"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTreeFile(t, tc.name, tc.content)
			var out, errOut strings.Builder
			err := run(context.Background(), &env{stdout: &out, stderr: &errOut}, append([]string{"tree", "validate", path}, tc.args...))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; output %s", out.String())
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestRunTree imports twice, shows by version, by time and as JSON, re-imports the JSON, and
// checks the versions in the store.
func TestRunTree(t *testing.T) {
	ctx := testctx.Context(t)
	store := embeddedtest.Start(t)
	db := store.Database(t, store.Client(t))
	t.Setenv("ROLLUP_MONGODB_URI", store.URI)
	treeCmd := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut strings.Builder
		err := run(ctx, &env{stdout: &out, stderr: &errOut}, append([]string{"tree"}, append(args, "--database", db.Name())...))
		return out.String(), err
	}
	mustTree := func(args ...string) string {
		t.Helper()
		out, err := treeCmd(args...)
		if err != nil {
			t.Fatalf("tree %v: %v", args, err)
		}
		return out
	}
	v1 := writeTreeFile(t, "v1.yaml", "project: demo\nroot:\n  id: demo\n  type: project\n  children:\n    - {id: g1, type: group, children: [{id: s1, type: server}, {id: s2, type: server}]}\n")
	v2 := writeTreeFile(t, "v2.json", `{"project": "demo", "nodes": [{"id": "demo", "type": "project"}, {"id": "g1", "type": "group", "parent": "demo"},
		{"id": "s1", "type": "server", "parent": "g1"}, {"id": "g2", "type": "group", "parent": "demo"}]}`)

	before := time.Now()
	out := mustTree("import", v1)
	next := tree.AlignTick(before, tree.DefaultTick).Add(tree.DefaultTick)
	if want := "project demo: version 1, effective from " + next.Format(time.RFC3339) + ", 4 nodes, 2 leaves\n"; out != want &&
		!strings.Contains(out, "version 1, effective from "+next.Add(tree.DefaultTick).Format(time.RFC3339)) { // the tick may turn during the test
		t.Fatalf("import output %q, want %q", out, want)
	}
	out = mustTree("import", v2, "--effective", "2099-01-01T00:02:00+01:00")
	for _, w := range []string{"version 2, effective from 2098-12-31T23:05:00Z, 4 nodes, 2 leaves", "rounded up to the tick start 2098-12-31T23:05:00Z"} {
		if !strings.Contains(out, w) {
			t.Errorf("import output lacks %q:\n%s", w, out)
		}
	}
	if _, err := treeCmd("import", v1, "--effective", "2098-01-01T00:00:00Z"); err == nil || !strings.Contains(err.Error(), "forward only") {
		t.Fatalf("import before the latest = %v", err)
	}

	wantV1 := "demo (project) leaves=2\n  g1 (group) leaves=2\n    s1 (server)\n    s2 (server)\n"
	wantV2 := "demo (project) leaves=2\n  g1 (group) leaves=1\n    s1 (server)\n  g2 (group)\n"
	shows := []struct {
		args []string
		want string
	}{
		{[]string{"show", "--project", "demo"}, "project demo version 2 of 2, effective from 2098-12-31T23:05:00Z, 4 nodes, 2 leaves\n" + wantV2},
		{[]string{"show", "--project", "demo", "--version", "1"}, "project demo version 1 of 2, effective from " + next.Format(time.RFC3339) + ", 4 nodes, 2 leaves\n" + wantV1},
		{[]string{"show", "--project", "demo", "--at", "2098-12-31T23:04:59Z"}, wantV1},
		{[]string{"show", "--project", "demo", "--at", "2098-12-31T23:05:00Z"}, wantV2},
	}
	for _, s := range shows {
		if out := mustTree(s.args...); !strings.HasSuffix(out, s.want) || (strings.HasPrefix(s.want, "project") && !strings.Contains(out, "of 2, effective from")) {
			t.Errorf("tree %v:\n%s\nwant:\n%s", s.args, out, s.want)
		}
	}
	if _, err := treeCmd("show", "--project", "demo", "--at", "2000-01-01T00:00:00Z"); err == nil || !strings.Contains(err.Error(), "no version of project \"demo\" is in effect") {
		t.Fatalf("show before the first version = %v", err)
	}
	if _, err := treeCmd("show", "--project", "nobody"); err == nil || !strings.Contains(err.Error(), "has no tree") {
		t.Fatalf("show of an unknown project = %v", err)
	}
	if _, err := treeCmd("show", "--project", "demo", "--version", "9"); !errors.Is(err, treedb.ErrNotFound) {
		t.Fatalf("show of a missing version = %v", err)
	}

	js := mustTree("show", "--project", "demo", "--version", "1", "--json")
	if !strings.Contains(js, `"root": {`) {
		t.Fatalf("show --json is not the nested layout:\n%s", js)
	}
	back := writeTreeFile(t, "back.json", js)
	if out := mustTree("import", back, "--effective", "2099-06-01T00:00:00Z"); !strings.Contains(out, "version 3,") {
		t.Fatalf("re-import of show --json: %s", out)
	}
	if out := mustTree("show", "--project", "demo"); !strings.HasSuffix(out, wantV1) {
		t.Fatalf("version 3 differs from version 1:\n%s", out)
	}

	// Invalid file: nothing is stored.
	bad := writeTreeFile(t, "bad.yaml", "project: demo\nnodes: [{id: demo, type: project}, {id: x, type: t, parent: nope}]\n")
	if _, err := treeCmd("import", bad); err == nil || !strings.Contains(err.Error(), "line 2: missing parent") {
		t.Fatalf("import of an invalid file = %v", err)
	}
	vs, err := treedb.New(db).Versions(ctx, "demo")
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions = %v, %v", vs, err)
	}
}
