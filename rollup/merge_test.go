package rollup

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func serverSet(version int) ChildSet {
	return ChildMap(map[string]string{"p1": "process", "p2": "process", "p3": "process"}, 3, version)
}

func stored(children map[string]ChildState, rev int64) Parent {
	p := Parent{ID: "s1", Type: "server", Project: "demo", Timestamp: testTick(), Rev: rev, Children: children, Expected: 3, TreeVersion: 1}
	for _, st := range children {
		p.Online += st.Online
		p.Reported += st.Reported
	}
	return p
}

func leafState(online, version int64) ChildState {
	return ChildState{Type: "process", Online: online, Version: version, Reported: 1, Expected: 1}
}

func TestMerge(t *testing.T) {
	base := map[string]ChildState{"p1": leafState(3, 10), "p2": leafState(4, 10)}
	tests := []struct {
		name        string
		p           Parent
		in          []Contribution
		cs          ChildSet
		wantChanged bool
		want        map[string]ChildState // children of the result
		wantOnline  int64
		wantRev     int64
	}{
		{
			name: "new parent from leaves", p: Parent{ID: "s1", Type: "server"},
			in:          []Contribution{LeafContribution("p1", "process", 3, 10), LeafContribution("p2", "process", 4, 10)},
			cs:          serverSet(1),
			wantChanged: true, want: base, wantOnline: 7, wantRev: 1,
		},
		{
			name: "newer version wins", p: stored(base, 5),
			in:          []Contribution{LeafContribution("p1", "process", 9, 11)},
			cs:          serverSet(1),
			wantChanged: true, want: map[string]ChildState{"p1": leafState(9, 11), "p2": leafState(4, 10)}, wantOnline: 13, wantRev: 6,
		},
		{
			name: "older version ignored", p: stored(base, 5),
			in: []Contribution{LeafContribution("p1", "process", 9, 9)}, cs: serverSet(1),
			want: base, wantOnline: 7, wantRev: 5,
		},
		{
			name: "tie keeps stored", p: stored(base, 5),
			in: []Contribution{LeafContribution("p1", "process", 9, 10)}, cs: serverSet(1),
			want: base, wantOnline: 7, wantRev: 5,
		},
		{
			name: "ties within one call: greatest payload, any order", p: stored(nil, 0),
			in:          []Contribution{LeafContribution("p3", "process", 1, 5), LeafContribution("p3", "process", 8, 5), LeafContribution("p3", "process", 2, 5)},
			cs:          serverSet(1),
			wantChanged: true, want: map[string]ChildState{"p3": leafState(8, 5)}, wantOnline: 8, wantRev: 1,
		},
		{
			name: "orphan dropped", p: stored(base, 5),
			in: []Contribution{LeafContribution("x9", "process", 50, 99)}, cs: serverSet(1),
			want: base, wantOnline: 7, wantRev: 5,
		},
		{
			name: "wrong type dropped", p: stored(base, 5),
			in: []Contribution{LeafContribution("p3", "server", 50, 99)}, cs: serverSet(1),
			want: base, wantOnline: 7, wantRev: 5,
		},
		{
			name: "removed child dropped from stored", p: stored(base, 5),
			in:          nil,
			cs:          ChildMap(map[string]string{"p1": "process"}, 1, 2),
			wantChanged: true, want: map[string]ChildState{"p1": leafState(3, 10)}, wantOnline: 3, wantRev: 6,
		},
		{
			name: "stored child whose tree type changed dropped", p: stored(base, 5),
			cs:          ChildMap(map[string]string{"p1": "process", "p2": "server"}, 2, 2),
			wantChanged: true, want: map[string]ChildState{"p1": leafState(3, 10)}, wantOnline: 3, wantRev: 6,
		},
		{
			name: "expected changes alone", p: stored(base, 5),
			cs:          ChildMap(map[string]string{"p1": "process", "p2": "process", "p3": "process", "p4": "process"}, 4, 1),
			wantChanged: true, want: base, wantOnline: 7, wantRev: 6,
		},
		{
			name: "tree version changes alone", p: stored(base, 5), cs: serverSet(2),
			wantChanged: true, want: base, wantOnline: 7, wantRev: 6,
		},
		{
			name: "nothing for a never written parent", p: Parent{ID: "s1", Type: "server"},
			in: []Contribution{LeafContribution("x9", "process", 1, 1)}, cs: serverSet(1),
			want: nil, wantOnline: 0, wantRev: 0,
		},
		{
			name: "nil Child func drops everything", p: stored(base, 5),
			in: []Contribution{LeafContribution("p1", "process", 9, 11)}, cs: ChildSet{TreeVersion: 1},
			wantChanged: true, want: map[string]ChildState{}, wantOnline: 0, wantRev: 6,
		},
		{
			name: "inconsistent stored totals are repaired", p: func() Parent { p := stored(base, 5); p.Online = 1000; return p }(),
			cs:          serverSet(1),
			wantChanged: true, want: base, wantOnline: 7, wantRev: 6,
		},
		{
			name: "parent child versioned by rev", p: Parent{ID: "g1", Type: "group", Rev: 2, Online: 5, Reported: 1, Expected: 2, TreeVersion: 1,
				Children: map[string]ChildState{"s1": {Type: "server", Online: 5, Version: 3, Reported: 1, Expected: 2}}},
			in: []Contribution{
				{Child: "s1", ChildType: "server", Online: 6, Version: 4, Reported: 2, Expected: 2},
				{Child: "s1", ChildType: "server", Online: 1, Version: 2, Reported: 1, Expected: 2},
			},
			cs:          ChildMap(map[string]string{"s1": "server"}, 2, 1),
			wantChanged: true, want: map[string]ChildState{"s1": {Type: "server", Online: 6, Version: 4, Reported: 2, Expected: 2}}, wantOnline: 6, wantRev: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(tt.p.Children)
			got, changed := Merge(tt.p, tt.in, tt.cs)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !reflect.DeepEqual(got.Children, tt.want) && (len(got.Children) != 0 || len(tt.want) != 0) {
				t.Errorf("children = %v, want %v", got.Children, tt.want)
			}
			if got.Online != tt.wantOnline || got.Rev != tt.wantRev {
				t.Errorf("online, rev = %d, %d; want %d, %d", got.Online, got.Rev, tt.wantOnline, tt.wantRev)
			}
			if changed && (got.Expected != tt.cs.Expected || got.TreeVersion != tt.cs.TreeVersion) {
				t.Errorf("expected, tree version = %d, %d; want the child set's %d, %d", got.Expected, got.TreeVersion, tt.cs.Expected, tt.cs.TreeVersion)
			}
			if !changed && !reflect.DeepEqual(got, tt.p) {
				t.Errorf("unchanged merge returned %+v, want the input %+v", got, tt.p)
			}
			if got.ID != tt.p.ID || got.Type != tt.p.Type || got.Project != tt.p.Project || !got.Timestamp.Equal(tt.p.Timestamp) {
				t.Errorf("identity changed: %+v", got)
			}
			if !maps.Equal(tt.p.Children, before) {
				t.Errorf("input children modified: %v, was %v", tt.p.Children, before)
			}
		})
	}
}

func TestRebuild(t *testing.T) {
	base := map[string]ChildState{"p1": leafState(3, 10), "p2": leafState(4, 10)}
	p := stored(base, 5)
	// The same current values: nothing to write.
	if _, changed := Rebuild(p, []Contribution{LeafContribution("p1", "process", 3, 10), LeafContribution("p2", "process", 4, 10)}, serverSet(1)); changed {
		t.Error("rebuild from the stored values changed the document")
	}
	// A stored child without a current value goes, even though it is still in the tree; a lower
	// version than stored is taken (the current values are the truth).
	got, changed := Rebuild(p, []Contribution{LeafContribution("p1", "process", 1, 2)}, serverSet(1))
	want := map[string]ChildState{"p1": leafState(1, 2)}
	if !changed || !reflect.DeepEqual(got.Children, want) || got.Online != 1 || got.Reported != 1 || got.Rev != 6 {
		t.Errorf("rebuild = %+v, %v; want children %v, online 1, rev 6", got, changed, want)
	}
	// Nothing at all: the stored document empties (and is written), a new one is not created.
	if got, changed := Rebuild(p, nil, serverSet(1)); !changed || len(got.Children) != 0 || got.Online != 0 {
		t.Errorf("rebuild from nothing = %+v, %v", got, changed)
	}
	if _, changed := Rebuild(Parent{ID: "s1"}, nil, serverSet(1)); changed {
		t.Error("rebuild created a document without children")
	}
}

// TestMergeOrderIndependent checks on one parent that merging random contributions in random
// splits and orders gives the children of one Merge of them all, and that it equals the naive
// rule: per child, the greatest version (payloads are a function of the version).
func TestMergeOrderIndependent(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		kids := map[string]string{}
		for i := range 1 + rng.IntN(8) {
			kids[fmt.Sprintf("c%d", i)] = "process"
		}
		cs := ChildMap(kids, int64(len(kids)), 1)
		var in []Contribution
		for range rng.IntN(30) {
			id := fmt.Sprintf("c%d", rng.IntN(10)) // c8, c9 are never children
			v := int64(rng.IntN(6))
			in = append(in, LeafContribution(id, "process", valueOf(id, v), v))
		}
		all, _ := Merge(Parent{ID: "s"}, in, cs)

		naive := map[string]ChildState{}
		for _, c := range in {
			if _, ok := kids[c.Child]; ok && (naive[c.Child].Version < c.Version || naive[c.Child].Type == "") {
				naive[c.Child] = leafState(c.Online, c.Version)
			}
		}
		if len(naive) != len(all.Children) || (len(naive) > 0 && !reflect.DeepEqual(naive, all.Children)) {
			t.Fatalf("seed %d: merge of all = %v, naive %v", seed, all.Children, naive)
		}

		p := Parent{ID: "s"}
		rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		for len(in) > 0 {
			n := 1 + rng.IntN(len(in))
			p, _ = Merge(p, in[:n], cs)
			if rng.IntN(3) == 0 {
				p, _ = Merge(p, in[:n], cs) // again
			}
			in = in[n:]
		}
		if len(p.Children) != len(all.Children) || (len(p.Children) > 0 && !reflect.DeepEqual(p.Children, all.Children)) ||
			p.Online != all.Online || p.Reported != all.Reported {
			t.Fatalf("seed %d: merged in parts = %+v, at once %+v", seed, p, all)
		}
	}
}

func TestContributions(t *testing.T) {
	if got, want := LeafContribution("p1", "process", 3, 42), (Contribution{Child: "p1", ChildType: "process", Online: 3, Version: 42, Reported: 1, Expected: 1}); got != want {
		t.Errorf("LeafContribution = %+v, want %+v", got, want)
	}
	p := Parent{ID: "s1", Type: "server", Project: "demo", Timestamp: time.Unix(0, 0), Online: 7, Rev: 4, Reported: 2, Expected: 3}
	if got, want := p.Contribution(), (Contribution{Child: "s1", ChildType: "server", Online: 7, Version: 4, Reported: 2, Expected: 3}); got != want {
		t.Errorf("Contribution = %+v, want %+v", got, want)
	}
}

func TestFullRecomputeErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"duplicate", []Node{{ID: "r"}, {ID: "a", Parent: "r"}, {ID: "a", Parent: "r"}}, `duplicate node "a"`},
		{"unknown parent", []Node{{ID: "r"}, {ID: "a", Parent: "zz"}}, `node "a": unknown parent "zz"`},
		{"cycle", []Node{{ID: "r"}, {ID: "a", Parent: "b"}, {ID: "b", Parent: "a"}}, `cycle through node "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FullRecompute(tt.nodes, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	got, err := FullRecompute([]Node{
		{ID: "r", Type: "project"}, {ID: "s", Type: "server", Parent: "r"},
		{ID: "a", Type: "process", Parent: "s"}, {ID: "b", Type: "process", Parent: "s"}, {ID: "e", Type: "group", Parent: "r"},
	}, map[string]Leaf{
		"a": {Type: "process", Online: 2, Version: 1}, "b": {Type: "server", Online: 5, Version: 1},
		"s": {Type: "server", Online: 9, Version: 1}, "x": {Type: "process", Online: 7, Version: 1},
	})
	want := map[string]Totals{
		"r": {Online: 2, Reported: 1, Expected: 3}, "s": {Online: 2, Reported: 1, Expected: 2},
		"a": {Online: 2, Reported: 1, Expected: 1}, "b": {Expected: 1}, "e": {Expected: 1},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FullRecompute = %v, %v; want %v", got, err, want)
	}
}

func BenchmarkMerge(b *testing.B) {
	kids := map[string]string{}
	stored := Parent{ID: "s", Type: "server", Rev: 1, Children: map[string]ChildState{}}
	in := make([]Contribution, 100)
	for i := range in {
		id := fmt.Sprintf("g01-s0001-p%02d", i)
		kids[id] = "process"
		stored.Children[id] = leafState(int64(i%5), 100)
		in[i] = LeafContribution(id, "process", int64(i%7), 200)
	}
	cs := ChildMap(kids, 100, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := Merge(stored, in, cs); !changed {
			b.Fatal("no change")
		}
	}
}
