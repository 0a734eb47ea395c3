package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gameops/rollup/api/apiv1"
)

// checkLeaves refuses, as a whole, a submission that reports a count under an interior node of
// the project's tree at its tick. Without Config.Trees, or before the project has a tree, it
// accepts everything.
func (s *Server) checkLeaves(ctx context.Context, sub *submission) *httpError {
	if s.cfg.Trees == nil {
		return nil
	}
	t, _, err := s.cfg.Trees.TreeAt(ctx, sub.project, sub.timestamp)
	if err != nil {
		return s.unavailableErr("tree lookup", err)
	}
	if t == nil {
		return nil
	}
	var bad []apiv1.FieldError
	for i, it := range sub.items {
		n, ok := t.Node(it.ID)
		if !ok || t.IsLeaf(it.ID) || n.Type != it.Type {
			continue
		}
		if len(bad) == maxListedErrors {
			break
		}
		index := i
		bad = append(bad, apiv1.FieldError{Index: &index, Field: fmt.Sprintf("counts[%d].id", i),
			Message: fmt.Sprintf("%q is an interior node (%s) of the project's tree at this tick: its total is computed from its children; report leaves only", it.ID, n.Type)})
	}
	if len(bad) == 0 {
		return nil
	}
	return &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
		Error:   apiv1.ErrInvalidItem,
		Message: fmt.Sprintf("%d count(s) name interior nodes of the tree; nothing was written, fix and resend the whole request", len(bad)),
		Errors:  bad,
	}}
}
