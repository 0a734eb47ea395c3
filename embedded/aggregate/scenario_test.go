package aggregate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Scenario files (testdata/*.json) hold {"scenarios": [{name, docs, pipeline, want | code}]}
// in relaxed extended JSON: 1 is an int32, {"$numberLong": "1"} an int64, 1.0 a double.
// Results are compared as canonical extended JSON, so field order and numeric types matter.

// decodeExtJSON parses an extended JSON document into decoded bsonval types.
func decodeExtJSON(t testing.TB, s string) bson.D {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("bad extended JSON %q: %v", s, err)
	}
	d, err := bsonval.Decode(raw)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return d
}

func toDocs(t testing.TB, v any) []bson.D {
	t.Helper()
	arr, ok := v.(bson.A)
	if !ok {
		t.Fatalf("expected an array, got %T", v)
	}
	out := make([]bson.D, len(arr))
	for i, e := range arr {
		d, ok := e.(bson.D)
		if !ok {
			t.Fatalf("element %d is %T, not a document", i, e)
		}
		out[i] = d
	}
	return out
}

func canon(t testing.TB, docs []bson.D) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	for i, d := range docs {
		if i > 0 {
			b.WriteString(", ")
		}
		j, err := bson.MarshalExtJSON(d, true, false)
		if err != nil {
			t.Fatalf("marshal %v: %v", d, err)
		}
		b.Write(j)
	}
	b.WriteString("]")
	return b.String()
}

func sliceSource(docs []bson.D) func(func(bson.D) bool) {
	return func(yield func(bson.D) bool) {
		for _, d := range docs {
			if !yield(d) {
				return
			}
		}
	}
}

// runPipeline compiles and runs pipeline over docs.
func runPipeline(pipeline, docs []bson.D) ([]bson.D, error) {
	p, err := Compile(pipeline)
	if err != nil {
		return nil, err
	}
	return p.Run(sliceSource(docs))
}

type scenario struct {
	file, name string
	docs       []bson.D
	pipeline   []bson.D
	want       []bson.D
	hasWant    bool
	code       int32
	msg        string
}

func loadScenarios(t testing.TB) []scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	var out []scenario
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := decodeExtJSON(t, string(data))
		list, _ := bsonval.Get(d, "scenarios")
		for i, sv := range list.(bson.A) {
			sd := sv.(bson.D)
			sc := scenario{file: filepath.Base(f)}
			for _, e := range sd {
				switch e.Key {
				case "name":
					sc.name = e.Value.(string)
				case "docs":
					sc.docs = toDocs(t, e.Value)
				case "pipeline":
					sc.pipeline = toDocs(t, e.Value)
				case "want":
					sc.want, sc.hasWant = toDocs(t, e.Value), true
				case "code":
					sc.code = e.Value.(int32)
				case "msg":
					sc.msg = e.Value.(string)
				default:
					t.Fatalf("%s scenario %d: unknown key %q", f, i, e.Key)
				}
			}
			if sc.name == "" || sc.hasWant == (sc.code != 0) {
				t.Fatalf("%s scenario %d (%q): needs a name and exactly one of want/code", f, i, sc.name)
			}
			out = append(out, sc)
		}
	}
	return out
}

func TestScenarios(t *testing.T) {
	scs := loadScenarios(t)
	names := map[string]bool{}
	for _, sc := range scs {
		key := sc.file + "/" + sc.name
		if names[key] {
			t.Fatalf("duplicate scenario %s", key)
		}
		names[key] = true
		t.Run(key, func(t *testing.T) {
			before := canon(t, sc.docs)
			got, err := runPipeline(sc.pipeline, sc.docs)
			if after := canon(t, sc.docs); after != before {
				t.Fatalf("input documents were modified:\nbefore %s\nafter  %s", before, after)
			}
			if sc.code != 0 {
				if err == nil {
					t.Fatalf("want error code %d, got result %s", sc.code, canon(t, got))
				}
				me := mongoerr.As(err)
				if me.Code != sc.code {
					t.Fatalf("want code %d, got %v", sc.code, err)
				}
				if sc.msg != "" && !strings.Contains(me.Msg, sc.msg) {
					t.Fatalf("want message containing %q, got %q", sc.msg, me.Msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if g, w := canon(t, got), canon(t, sc.want); g != w {
				t.Fatalf("result mismatch\n got  %s\n want %s", g, w)
			}
		})
	}
	if len(scs) < 50 {
		t.Fatalf("only %d scenarios loaded", len(scs))
	}
}

func TestScenarioFilesPresent(t *testing.T) {
	// Guard against silently dropped files: every stage the package implements has a file.
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	var base []string
	for _, f := range files {
		base = append(base, filepath.Base(f))
	}
	for _, want := range []string{"errors.json", "expr.json", "group.json", "project.json", "stages.json", "unwind.json"} {
		if !slices.Contains(base, want) {
			t.Errorf("missing testdata/%s (have %v)", want, base)
		}
	}
}
