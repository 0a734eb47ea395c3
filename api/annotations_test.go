package api_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// TestAnnotations: tree versions taking effect and the recorded events (the project's and
// those of every project) in the window, by time; another project's events and what lies
// outside the window are not listed.
func TestAnnotations(t *testing.T) {
	s := newReadStack(t, zaptest.NewLogger(t))
	const project = "proj-a"
	w := newWorld(project)
	nodes := tree.Generate(project, 1, 1, 2)
	w.importTree(t, s, nodes, rt0)
	w.importTree(t, s, append(nodes, tree.Node{ID: "extra", Type: tree.TypeProcess, Parent: nodes[0].ID}), rt0.Add(time.Hour))
	other := newWorld("proj-b")
	other.importTree(t, s, []tree.Node{{ID: "b-root", Type: tree.TypeProject}, {ID: "b-leaf", Type: tree.TypeProcess, Parent: "b-root"}}, rt0)
	ev := store.NewEvents(s.db)
	for _, e := range []store.Event{
		{Kind: store.EventReplay, Project: project, At: rt0.Add(30 * time.Minute), End: rt0.Add(50 * time.Minute), Title: "rollup replay", Text: "4 ticks"},
		{Kind: store.EventRetention, At: rt0.Add(70 * time.Minute), Title: "retention pass", Text: "deleted 9"},
		{Kind: store.EventReplay, Project: "proj-b", At: rt0.Add(40 * time.Minute), Title: "rollup replay", Text: "another project"},
		{Kind: store.EventReplay, Project: project, At: rt0.Add(5 * time.Hour), Title: "rollup replay", Text: "outside"},
	} {
		if err := ev.Record(s.ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var got apiv1.AnnotationsResponse
	s.getOK(t, s.token(t, project, true), apiv1.ProjectsPath+"/"+project+apiv1.AnnotationsPath,
		url.Values{"from": {rt0.Format(time.RFC3339)}, "to": {rt0.Add(2 * time.Hour).Format(time.RFC3339)}}, &got)
	want := []struct {
		kind, title string
		at          time.Time
	}{
		{"tree", "tree v1", rt0}, {"replay", "rollup replay", rt0.Add(30 * time.Minute)}, {"tree", "tree v2", rt0.Add(time.Hour)},
		{"retention", "retention pass", rt0.Add(70 * time.Minute)},
	}
	if len(got.Annotations) != len(want) {
		t.Fatalf("annotations %+v, want %+v", got.Annotations, want)
	}
	for i, a := range got.Annotations {
		if a.Kind != want[i].kind || a.Title != want[i].title || !a.Time.Equal(want[i].at) || len(a.Tags) != 2 || a.Tags[1] != a.Kind {
			t.Errorf("annotation %d: %+v, want %+v", i, a, want[i])
		}
	}
	if r := got.Annotations[1]; !r.TimeEnd.Equal(rt0.Add(50*time.Minute)) || r.Text != "4 ticks" {
		t.Errorf("the replay: %+v", r)
	}
}

// TestAnnotationsOutages: store outages and history-lost replays, recorded for every project,
// are listed for each project; two instances' records of one outage (overlapping) are one
// annotation spanning both, with each instance's view, and an outage that only follows
// another is kept apart.
func TestAnnotationsOutages(t *testing.T) {
	s := newReadStack(t, zaptest.NewLogger(t))
	ev := store.NewEvents(s.db)
	for _, e := range []store.Event{
		{Kind: store.EventOutage, At: rt0.Add(10 * time.Minute), End: rt0.Add(14 * time.Minute), Title: "store outage", Text: "instance a refused writes for 4m0s"},
		{Kind: store.EventOutage, At: rt0.Add(11 * time.Minute), End: rt0.Add(15 * time.Minute), Title: "store outage", Text: "instance b refused writes for 4m0s"},
		{Kind: store.EventOutage, At: rt0.Add(15 * time.Minute), End: rt0.Add(16 * time.Minute), Title: "store outage", Text: "instance b refused writes for 1m0s"},
		{Kind: store.EventHistoryLost, At: rt0.Add(20 * time.Minute), End: rt0.Add(25 * time.Minute), Title: "change stream history lost", Text: "replayed"},
	} {
		if err := ev.Record(s.ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, project := range []string{"proj-a", "proj-b"} {
		newWorld(project).importTree(t, s, []tree.Node{{ID: project + "-root", Type: tree.TypeProject},
			{ID: project + "-leaf", Type: tree.TypeProcess, Parent: project + "-root"}}, rt0)
		var got apiv1.AnnotationsResponse
		s.getOK(t, s.token(t, project, true), apiv1.ProjectsPath+"/"+project+apiv1.AnnotationsPath,
			url.Values{"from": {rt0.Format(time.RFC3339)}, "to": {rt0.Add(time.Hour).Format(time.RFC3339)}}, &got)
		var kinds []string
		for _, a := range got.Annotations {
			kinds = append(kinds, a.Kind+" "+a.Time.Format("15:04")+"-"+a.TimeEnd.Format("15:04"))
		}
		want := []string{"tree 00:00-00:00", "outage 00:10-00:15", "outage 00:15-00:16", "history_lost 00:20-00:25"}
		if !slices.Equal(kinds, want) {
			t.Fatalf("%s: annotations %v, want %v", project, kinds, want)
		}
		if m := got.Annotations[1]; m.Title != "store outage (seen by 2 instances)" || !strings.Contains(m.Text, "instance a") || !strings.Contains(m.Text, "instance b") {
			t.Errorf("%s: the merged outage %+v", project, m)
		}
		if h := got.Annotations[3]; !slices.Equal(h.Tags, []string{"rollup", "history_lost", "alert"}) {
			t.Errorf("%s: history lost tags %v", project, h.Tags)
		}
	}
}
