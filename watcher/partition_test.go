package watcher

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

func TestParsePartitions(t *testing.T) {
	tests := []struct {
		spec    string
		names   []string
		wantErr bool
	}{
		{spec: "", names: []string{""}},
		{spec: "all", names: []string{""}},
		{spec: "hash:1", names: []string{""}},
		{spec: "hash:3", names: []string{"hash-0-of-3", "hash-1-of-3", "hash-2-of-3"}},
		{spec: "projects:a,b;c", names: []string{"list-0", "list-1", "rest"}},
		{spec: "hash:0", wantErr: true},
		{spec: "hash:1025", wantErr: true},
		{spec: "hash:x", wantErr: true},
		{spec: "projects:a,,b", wantErr: true},
		{spec: "projects:a;a", wantErr: true},
		{spec: "range:1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			ps, err := ParsePartitions(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			var names []string
			for _, p := range ps {
				names = append(names, p.Name)
			}
			if !tt.wantErr && !reflect.DeepEqual(names, tt.names) {
				t.Fatalf("names = %q, want %q", names, tt.names)
			}
		})
	}
}

// TestPartitionsCover checks that every project belongs to exactly one partition of a spec,
// and that a project list's server-side filter agrees with owns.
func TestPartitionsCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, spec := range []string{"all", "hash:2", "hash:7", "projects:p1,p2;p3", "projects:p9"} {
		ps, err := ParsePartitions(spec)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, len(ps))
		for i := range 2000 {
			project := fmt.Sprintf("p%d", i%20)
			if i >= 20 {
				project = fmt.Sprintf("proj-%x", rng.Uint64())
			}
			n := 0
			for j, p := range ps {
				if p.owns(project) {
					n++
					counts[j]++
				}
			}
			if n != 1 {
				t.Fatalf("%s: project %q is in %d partitions", spec, project, n)
			}
		}
		for j, c := range counts {
			if c == 0 && len(ps) > 1 && ps[j].Of > 0 {
				t.Errorf("%s: hash partition %s got no project of 2000", spec, ps[j].Name)
			}
		}
		for _, p := range ps {
			if (p.projectFilter() == nil) != (len(p.Projects) == 0) {
				t.Errorf("%s/%s: server filter %v for projects %v", spec, p.Name, p.projectFilter(), p.Projects)
			}
			if p.all() && p.id("w") != "w" || !p.all() && p.id("w") != "w/"+p.Name {
				t.Errorf("%s/%s: id %q", spec, p.Name, p.id("w"))
			}
		}
	}
}

// TestOwnsDoc checks the partition test of a raw leaf document against owns on its decoded
// project, for every kind of partition, and that a project that is not a string is unknown
// (DecodeLeaf reports it) rather than owned or not.
func TestOwnsDoc(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, spec := range []string{"all", "hash:2", "hash:7", "projects:p1,p2;p3"} {
		ps, err := ParsePartitions(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			project := fmt.Sprintf("p%d", i%5)
			if i >= 5 {
				project = fmt.Sprintf("proj-%x", rng.Uint64())
			}
			doc, err := bson.Marshal(bson.D{{Key: "id", Value: "x"}, {Key: store.FieldProject, Value: project}})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if got, known := p.ownsDoc(doc); !known || got != p.owns(project) {
					t.Fatalf("%s/%s: ownsDoc(%q) = %v, %v; owns = %v", spec, p.Name, project, got, known, p.owns(project))
				}
			}
		}
		for _, doc := range []bson.D{{{Key: "id", Value: "x"}}, {{Key: store.FieldProject, Value: 7}}} {
			raw, err := bson.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if _, known := p.ownsDoc(raw); known != p.all() {
					t.Errorf("%s/%s: ownsDoc(%v) known = %v", spec, p.Name, doc, known)
				}
			}
		}
	}
}

// TestProjectHashIsFNV keeps the partitions' hash what it was (hash/fnv's FNV-1a 32): a
// changed hash would move projects between partitions, and their checkpoints with them.
func TestProjectHashIsFNV(t *testing.T) {
	for _, s := range []string{"", "a", "proj", "project-0042", "日本", "p\x00q"} {
		h := fnv.New32a()
		_, _ = h.Write([]byte(s))
		if got, want := projectHash(s), h.Sum32(); got != want || projectHash([]byte(s)) != want {
			t.Errorf("projectHash(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestHashPartitionDecodesOwnLeaves runs the watcher of one hash partition of two over leaves
// of projects of both: its stream carries them all, and it decodes only its own (before, it
// decoded every leaf, then dropped the other partition's: with hash:8, seven of eight).
func TestHashPartitionDecodesOwnLeaves(t *testing.T) {
	e := newEnv(t)
	parts, err := ParsePartitions("hash:2")
	if err != nil {
		t.Fatal(err)
	}
	t0 := baseTick()
	var own, other []string
	for i := 0; len(own) < 2 || len(other) < 2; i++ {
		p := fmt.Sprintf("proj-%d", i)
		if parts[0].owns(p) {
			own = append(own, p)
		} else {
			other = append(other, p)
		}
	}
	own, other = own[:2], other[:2]
	items := func(projects []string) []bulk.Item {
		var out []bulk.Item
		for _, p := range projects {
			e.trees.Add(t, p, t0.Add(-24*time.Hour), tree.Prefixed(p, tree.Generate(p, 1, 2, 3)))
			tr, _, _ := e.trees.TreeAt(context.Background(), p, t0)
			for i, l := range tr.Leaves() {
				out = append(out, item(p, l.ID, l.Type, t0, int64(i+1), 100))
			}
		}
		return out
	}
	otherItems, ownItems := items(other), items(own)
	w := e.newWatcher(Options{Partitions: parts[:1], CheckpointInterval: time.Millisecond})
	e.start(w)
	// The leaves are written once the stream reads from a position: a leaf written while
	// the watcher starts (no checkpoint yet) is recomputed by its start-up replay and read
	// again from the stream, which counts it twice in Events (seen on a loaded machine:
	// "processed 24 events").
	testctx.WaitFor(t, "the stream to read from a position", func() bool { return len(w.Progress().Streams) == 1 })
	e.submit(otherItems...) // first: the stream has read them once own's leaves are rolled up
	e.submit(ownItems...)
	for _, p := range own {
		e.waitCorrect(p)
	}
	if s := w.Stats(); s.Decoded != int64(len(ownItems)) || s.Events != int64(len(ownItems)) {
		t.Fatalf("decoded %d leaves, processed %d events (%d replays); want %d of the %d on the stream",
			s.Decoded, s.Events, s.Replays, len(ownItems), len(ownItems)+len(otherItems))
	}
}
