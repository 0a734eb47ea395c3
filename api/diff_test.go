package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// TestDiffEndpoint reads GET .../diff over HTTP from stored documents: a leaf gone silent
// and a real drop between two ticks, the default "to" (the latest tick), a subtree, and
// the parameter errors.
func TestDiffEndpoint(t *testing.T) {
	s := newReadStack(t, zaptest.NewLogger(t))
	const project = "proj-d"
	w := newWorld(project)
	w.importTree(t, s, tree.Generate(project, 1, 2, 2), rt0) // g01-s0001-p01 … g01-s0002-p02
	t1, t2 := rt0.Add(10*rtick), rt0.Add(20*rtick)
	for _, l := range w.at(t1).tree.Leaves() {
		w.set(t1, l.ID, 10)
		if l.ID != "g01-s0001-p02" { // goes silent
			w.set(t2, l.ID, 10)
		}
	}
	w.set(t2, "g01-s0002-p01", 4) // a real drop of 6
	w.write(t, s)
	tok := s.token(t, project, true)
	path := apiv1.ProjectsPath + "/" + project + apiv1.DiffPath

	var got apiv1.DiffResponse
	s.getOK(t, tok, path, url.Values{"from": {t1.Format("2006-01-02T15:04:05Z")}}, &got) // to: the latest tick
	if !got.To.Equal(t2) || got.Root.From != 40 || got.Root.To != 24 || got.Root.Change != -16 || got.SilentOnline != 10 ||
		got.Root.ReportedChange != -6 || got.SilentTotal != 1 || got.Silent[0].ID != "g01-s0001-p02" {
		t.Fatalf("diff %s → %s: root %+v silent %+v (%d)", got.From, got.To, got.Root, got.Silent, got.SilentOnline)
	}
	// The biggest changes first: the group (−16), the silent leaf and its server (−10), then
	// the drop (−6).
	if len(got.Nodes) != 5 || got.Nodes[0].ID != "g01" || got.Nodes[1].ID != "g01-s0001" || got.Nodes[2].ID != "g01-s0001-p02" ||
		got.Nodes[1].SilentOnline != 10 || got.Nodes[3].ID != "g01-s0002" || got.Nodes[3].ReportedChange != -6 || *got.Nodes[3].Share != 6.0/16 {
		t.Fatalf("nodes %+v", got.Nodes)
	}
	s.getOK(t, tok, path, url.Values{"from": {t1.Format("2006-01-02T15:04:05Z")}, "to": {t2.Format("2006-01-02T15:04:05Z")}, "node": {"g01-s0002"}, "n": {"1"}}, &got)
	if got.Node != "g01-s0002" || got.Root.Change != -6 || got.NodesTotal != 1 || len(got.Nodes) != 1 || got.SilentTotal != 0 {
		t.Fatalf("subtree diff: %+v", got)
	}
	s.getErr(t, tok, path, nil, http.StatusBadRequest, apiv1.ErrInvalidParameter, "from")
	s.getErr(t, tok, path, url.Values{"from": {"2999-01-01T00:00:00Z"}}, http.StatusBadRequest, apiv1.ErrInvalidParameter, "from")
	s.getErr(t, tok, path, url.Values{"from": {t1.Format("2006-01-02T15:04:05Z")}, "node": {"nope"}}, http.StatusNotFound, apiv1.ErrUnknownNode, "node")
	s.getErr(t, tok, path, url.Values{"from": {t1.Format("2006-01-02T15:04:05Z")}, "n": {"0"}}, http.StatusBadRequest, apiv1.ErrInvalidParameter, "n")
}
