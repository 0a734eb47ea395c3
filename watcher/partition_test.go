package watcher

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
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
