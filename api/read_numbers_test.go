package api_test

import (
	"net/http"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// TestReadStoredNumbers: the read API reads stored counts the way every reader does
// (store.Count): a leaf stored as the double 7.0 (as mongosh writes `online: 7`) is the count
// 7; one stored as 7.5 is an invalid document, a 500 that names no wrong number.
func TestReadStoredNumbers(t *testing.T) {
	s := newReadStack(t, zaptest.NewLogger(t))
	w := newWorld("proj-n")
	w.importTree(t, s, tree.Generate("proj-n", 1, 1, 2), rt0)
	at := rt0.Add(time.Hour)
	w.set(at, "g01-s0001-p01", 3)
	w.set(at, "g01-s0001-p02", 4)
	w.noParents[at] = true // leaves only: their values are what the tree shows
	w.write(t, s)
	tok := s.token(t, "proj-n", true)
	path := apiv1.ProjectsPath + "/proj-n" + apiv1.TreePath
	q := tickValues(at)
	setOnline := func(v any) {
		t.Helper()
		res, err := s.db.Collection(store.CountsCollection).UpdateOne(s.ctx,
			store.KeyFilter(store.Key{ID: "g01-s0001-p01", Type: tree.TypeProcess, Tick: at}),
			bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: v}}}})
		if err != nil || res.MatchedCount != 1 {
			t.Fatalf("set online: %v %+v", err, res)
		}
	}
	online := func() int64 {
		t.Helper()
		var got apiv1.TreeResponse
		s.getOK(t, tok, path, q, &got)
		for _, n := range got.Nodes {
			if n.ID == "g01-s0001-p01" {
				return n.Online
			}
		}
		t.Fatalf("no node g01-s0001-p01 in %+v", got.Nodes)
		return 0
	}
	if got := online(); got != 3 {
		t.Fatalf("online = %d, want 3", got)
	}
	setOnline(7.0)
	if got := online(); got != 7 {
		t.Fatalf("online stored as 7.0 reads %d, want 7", got)
	}
	setOnline(7.5)
	s.getErr(t, tok, path, q, http.StatusInternalServerError, apiv1.ErrInternal, "")
}
