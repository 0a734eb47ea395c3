package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gameops/rollup/api/apiv1"
)

// errNotCovered reports a tick older than the tree index's window (Config.Trees must cover
// LateWindow).
var errNotCovered = errors.New("the tree index does not cover this tick: give it a window of at least the late window")

// checkLeaves refuses, as a whole, a submission that reports a count under a node of another
// project's tree at its tick (403: a token writes only its own project's nodes), or under an
// interior node of the project's own tree (400: its total is computed). Without Config.Trees
// it accepts everything; ids no tree holds are accepted (orphans). An item whose id is a node
// of the project's tree at the tick under another type is refused on its own (sub.mismatch:
// status rejected, naming the tree's type, nothing written for it): stored, it would be
// counted nowhere, neither in a total nor as an orphan of the read API or verify.
func (s *Server) checkLeaves(ctx context.Context, sub *submission) *httpError {
	if s.cfg.Trees == nil {
		return nil
	}
	snap, err := s.cfg.Trees.Snapshot(ctx)
	if err != nil {
		return s.unavailableErr("tree lookup", err)
	}
	if !snap.Covers(sub.timestamp) {
		return s.internal("tree lookup", fmt.Errorf("tick %s: %w", sub.timestamp, errNotCovered))
	}
	own, _ := snap.TreeAt(sub.project, sub.timestamp)
	var foreign, interior []apiv1.FieldError
	sub.mismatch = nil
	for i, it := range sub.items {
		if own != nil {
			if r, ok := own.Lookup(it.ID); ok { // one lookup of the id per item
				if typ := own.TypeAt(r); typ != it.Type {
					if sub.mismatch == nil {
						sub.mismatch = map[int]string{}
					}
					sub.mismatch[i] = fmt.Sprintf("%q is a %s in the project's tree at this tick, not a %s: nothing was written for it; report it with type %q (or fix the id)",
						it.ID, typ, it.Type, typ)
					continue
				}
				if !own.IsLeafAt(r) && len(interior) < maxListedErrors {
					index := i
					interior = append(interior, apiv1.FieldError{Index: &index, Field: fmt.Sprintf("counts[%d].id", i),
						Message: fmt.Sprintf("%q is an interior node (%s) of the project's tree at this tick: its total is computed from its children; report leaves only", it.ID, own.TypeAt(r))})
				}
				continue
			}
		}
		if snap.OtherOwner(sub.project, it.ID, sub.timestamp) != "" && len(foreign) < maxListedErrors {
			index := i
			foreign = append(foreign, apiv1.FieldError{Index: &index, Field: fmt.Sprintf("counts[%d].id", i),
				Message: fmt.Sprintf("%q is a node of another project's tree at this tick; a token writes only its own project's nodes", it.ID)})
		}
	}
	switch {
	case len(foreign) > 0:
		return &httpError{status: http.StatusForbidden, body: apiv1.ErrorResponse{
			Error:   apiv1.ErrForbidden,
			Message: fmt.Sprintf("%d count(s) name nodes of another project; nothing was written, remove them and resend", len(foreign)),
			Errors:  foreign,
		}}
	case len(interior) > 0:
		return &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
			Error:   apiv1.ErrInvalidItem,
			Message: fmt.Sprintf("%d count(s) name interior nodes of the tree; nothing was written, fix and resend the whole request", len(interior)),
			Errors:  interior,
		}}
	}
	return nil
}
